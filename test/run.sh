#!/usr/bin/env bash
# `npm test`: everything, in the order that fails fastest. Each step prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "Patched llama.cpp build (skipped when the patch series is unchanged)"
node native/build.mjs --if-stale

step "Generated GGUF fixtures"
npx --no tsx test/fixtures/generate.ts

step "Typecheck"
npx --no tsc -p tsconfig.node.json --noEmit
npx --no svelte-check --tsconfig tsconfig.web.json --fail-on-warnings --output human

step "Build (main, preload, renderer)"
npx --no electron-vite build

step "Tests"
npx --no vitest run --project unit --project renderer
npx --no vitest run --project engine
npx --no vitest run --project native
npx --no vitest run --project e2e
