// Where TRIM-KV's gates lose a family they were not calibrated on: per held-out problem, greedy under Full and under
// TRIM-KV at shares of Full's cells, whether the question's words come before its data (then the data's tokens can
// carry what is asked when their gates are computed) or after, and how far the thought goes before its first wrong line.
//
// Usage: tsx test/bench/transferMisses.ts --model <copy with its gates>.gguf --families reverse,tally
//            [--problems 16] [--shares 0.25,0.5] [--threads 2]
import {parseArgs} from "node:util";
import type {MultiFamily} from "../../main/demo/multiTask.js";
import {heldOutMultiProblems, MULTI_FAMILIES} from "../../main/demo/multiTask.js";
import {demoThinkingPrefixLines, isDemoAnswerCorrect} from "../../main/demo/demoTask.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {greedySolve} from "../engine/greedyAnswer.js";

const {values} = parseArgs({
    options: {
        model: {type: "string"},
        families: {type: "string", default: "reverse,tally"},
        problems: {type: "string", default: "16"},
        shares: {type: "string", default: "0.25,0.5"},
        threads: {type: "string", default: "2"}
    }
});
if (values.model == null) throw new Error("--model <path.gguf> (a model with its retention gates beside it)");
const families = values.families.split(",") as MultiFamily[];
if (families.some((family) => !MULTI_FAMILIES.includes(family))) throw new Error(`--families takes ${MULTI_FAMILIES.join(", ")}`);
const shares = values.shares.split(",").map(Number);

const engine = new Engine({loadLlama: loadRuntime, threads: Number(values.threads)});
try {
    await engine.loadModel(values.model, null);
    for (const family of families) {
        const rows = [];
        for (const problem of heldOutMultiProblems(Number(values.problems), [family])) {
            const full = await greedySolve(engine, problem.question, "full", 4096);
            const lines = problem.thinking.split("\n").length;
            const dataFirst = /^\d/.test(problem.question);
            const row: Record<string, string | number | boolean> = {
                seed: problem.seed,
                size: problem.size,
                dataFirst,
                full: isDemoAnswerCorrect(problem, full.answer)
            };
            for (const share of shares) {
                const run = await greedySolve(engine, problem.question, "trimkv", Math.round(full.used * share));
                row[`right@${share}`] = isDemoAnswerCorrect(problem, run.answer);
                row[`lines@${share}`] = `${demoThinkingPrefixLines(problem, run.thought)}/${lines}`;
                // a whole thought with a wrong answer: what was lost is read by the answer, not by the thought
                row[`thought@${share}`] = run.thought === problem.thinking;
            }
            rows.push(row);
            console.log(JSON.stringify({family, ...row}));
        }
        for (const dataFirst of [false, true]) {
            const group = rows.filter((row) => row.dataFirst === dataFirst);
            const counts = shares
                .map((share) => {
                    const right = group.filter((row) => row[`right@${share}`]).length;
                    const whole = group.filter((row) => row[`thought@${share}`]).length;
                    return `${share}: ${right} (thought whole ${whole})`;
                })
                .join(", ");
            console.log(
                `${family}, ${dataFirst ? "data before the words" : "words before the data"}: ${group.length} problems, ` +
                    `Full ${group.filter((row) => row.full).length}, TRIM-KV right at ${counts}`
            );
        }
    }
} finally {
    await engine.dispose();
}
