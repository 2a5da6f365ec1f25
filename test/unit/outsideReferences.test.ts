import fs from "node:fs";
import path from "node:path";
import {describe, expect, it} from "vitest";

// The project speaks only of itself: code, tests and docs cite what a reader of the repository can open (its own files,
// a paper by name and section, a section of docs/BENCHMARKS.md), never a style guide, a design document, an issue
// tracker's numbers or a folder kept outside it (docs/CONTRIBUTING.md, "Style").
const root = path.resolve(import.meta.dirname, "../..");

// The names the references use, spelled from parts: this file is scanned as every other is, and holds none of them.
const styleGuide = `${"style".toUpperCase()}.md`;
const designDocument = "design".toUpperCase();
const issue = "issue";
const papersFolder = "papers";
const sharedFolder = "shared";

/** What a reference to a document outside the repository looks like. */
const outside: {what: string; pattern: RegExp}[] = [
    {what: "a style guide kept elsewhere", pattern: new RegExp(`\\b${styleGuide.replace(".", "\\.")}\\b`)},
    {what: "a design document's sections", pattern: new RegExp(`\\b${designDocument}\\b`)},
    {what: "an issue's number", pattern: new RegExp(`\\b${issue}s? #?\\d+`, "i")},
    {what: "a numbered paper in a folder kept elsewhere", pattern: new RegExp(`\\b${papersFolder}/\\d`)},
    {what: "a shared folder kept elsewhere", pattern: new RegExp(`(^|[\\s(\`'"])${sharedFolder}/($|[\\s\`'"\\w.])`)}
];

/** Not written by hand, or not the project's: build outputs, installed packages, generated files, models, run logs. */
const skipped = new Set([
    "out",
    "dist",
    "test-results",
    ".fixtures",
    "native/.build",
    "resources",
    "test/bench/results",
    "test/eval/train/runs"
]);
/** The same, wherever they are. */
const skippedNames = new Set([".git", "node_modules", "__pycache__"]);
const written = /\.(ts|mts|svelte|js|mjs|cjs|py|sh|md|yml|yaml|patch|html|css)$/;

function files(dir: string): string[] {
    return fs.readdirSync(path.join(root, dir), {withFileTypes: true}).flatMap((entry) => {
        const rel = dir === "" ? entry.name : `${dir}/${entry.name}`;
        if (skipped.has(rel) || skippedNames.has(entry.name)) return [];
        if (entry.isDirectory()) return files(rel);
        return entry.isFile() && (written.test(entry.name) || dir === ".ci") ? [rel] : [];
    });
}

/** Each reference to a document outside the repository in `text`, as `file:line: what: the line`. */
function references(file: string, text: string): string[] {
    return text
        .split("\n")
        .flatMap((line, index) =>
            outside.filter(({pattern}) => pattern.test(line)).map(({what}) => `${file}:${index + 1}: ${what}: ${line.trim().slice(0, 100)}`)
        );
}

describe("references", () => {
    const all = files("");

    it("finds the code, tests and docs", () => {
        const some = ["README.md", "docs/CONTRIBUTING.md", "main/index.ts", "renderer/App.svelte", "test/run.sh", "eslint.config.js"];
        for (const file of [...some, "test/unit/outsideReferences.test.ts"]) expect(all).toContain(file);
        expect(all.some((file) => file.endsWith(".py"))).toBe(true);
        expect(all.some((file) => file.startsWith("native/patches/"))).toBe(true);
    });

    it("cite nothing outside the repository: no style guide, design document, issue number or outside folder", () => {
        const found = all.flatMap((file) => references(file, fs.readFileSync(path.join(root, file), "utf8")));
        expect(found).toEqual([]);
    });

    it("the scan finds each form it looks for, and nothing else", () => {
        const cited = [
            `// Prefer \`type\` (${styleGuide}).`,
            `/** One reading (${designDocument} §5). */`,
            `// The calibration (${issue} 36): ...`,
            `(${issue} 13's measurements)`,
            `see ${issue}s #12 and #13`,
            `TRIM-KV (${papersFolder}/001)`,
            `the notes in ${sharedFolder}/design`,
            `\`${sharedFolder}/\``
        ];
        expect(cited.map((line) => references("sample", line).length)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
        const own = [
            "error.issues[0]?.message",
            "a design note kept elsewhere",
            "## Design",
            "node_modules/x/shared/y.js",
            "const sharedState = 1;",
            "docs/CONTRIBUTING.md, docs/BENCHMARKS.md",
            "expect(source).toMatch(/read 0.5, shared/);"
        ];
        expect(own.flatMap((line) => references("sample", line))).toEqual([]);
    });
});
