#!/usr/bin/env bash
# `npm test`: everything, in the order that fails fastest. Each step prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "Patched llama.cpp build (skipped when the patch series is unchanged)"
node native/build.mjs --gpu false --if-stale

step "better-sqlite3 built for Node (npm start rebuilds it for Electron)"
node -e "require('better-sqlite3')(':memory:').close()" 2>/dev/null || npm rebuild better-sqlite3

step "Generated GGUF fixtures"
tsx test/fixtures/generate.ts

step "Typecheck"
tsc -p tsconfig.node.json --noEmit
svelte-check --tsconfig tsconfig.web.json --fail-on-warnings --output human

step "Lint (ESLint: eslint.config.js)"
eslint .

step "Format (Prettier: .prettierrc; npm run format writes it)"
prettier --check . --log-level warn

step "Build (main, preload, renderer)"
electron-vite build

step "Tests"
vitest run --project unit --project renderer
vitest run --project engine
vitest run --project native
vitest run --project e2e
