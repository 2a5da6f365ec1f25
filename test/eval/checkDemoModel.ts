// Held-out accuracy of a shipped task model with the full KV cache (no pruning), through node-llama-cpp the way
// the app runs it (LlamaChatSession, empty history, greedy): the demo model on the demo task, or (--task merge) the
// merge model on the merge task.
//
// Usage: npx tsx test/eval/checkDemoModel.ts [--count 100] [--model resources/models/ponder-demo.gguf]
//                                            [--min-steps 10] [--max-steps 110] [--min-vars 6] [--max-vars 16]
//                                            [--offset 0] [--verbose]
//        npx tsx test/eval/checkDemoModel.ts --task merge [--count 100] [--min-items 40] [--max-items 80] [--min-k-share 0.5]

import path from "node:path";
import {fileURLToPath} from "node:url";
import {parseArgs} from "node:util";
import {getLlama, LlamaChatSession} from "node-llama-cpp";
import {
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_VARS,
    DEFAULT_MIN_STEPS,
    DEFAULT_MIN_VARS,
    demoThinkingPrefixLines,
    extractDemoAnswer,
    heldOutDemoProblems,
    isDemoAnswerCorrect
} from "./demoTask.js";
import {DEFAULT_MAX_ITEMS, DEFAULT_MIN_ITEMS, HELD_OUT_MIN_K_SHARE, heldOutMergeProblems} from "./mergeTask.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const {values: args} = parseArgs({
    options: {
        task: {type: "string", default: "demo"},
        count: {type: "string", default: "100"},
        model: {type: "string"},
        "min-steps": {type: "string", default: String(DEFAULT_MIN_STEPS)},
        "max-steps": {type: "string", default: String(DEFAULT_MAX_STEPS)},
        "min-vars": {type: "string", default: String(DEFAULT_MIN_VARS)},
        "max-vars": {type: "string", default: String(DEFAULT_MAX_VARS)},
        "min-items": {type: "string", default: String(DEFAULT_MIN_ITEMS)},
        "max-items": {type: "string", default: String(DEFAULT_MAX_ITEMS)},
        "min-k-share": {type: "string", default: String(HELD_OUT_MIN_K_SHARE)},
        offset: {type: "string", default: "0"},
        "context-size": {type: "string", default: "4096"},
        verbose: {type: "boolean", default: false}
    }
});

const count = Number(args.count);
if (args.task !== "demo" && args.task !== "merge") throw new Error(`unknown task ${args.task}: demo or merge`);
const merge = args.task === "merge";
// Both tasks' problems as {question, thinking, answer, size}: the size (program steps, list items) bounds the output.
const problems = merge
    ? heldOutMergeProblems(
          count,
          {minItems: Number(args["min-items"]), maxItems: Number(args["max-items"]), minKShare: Number(args["min-k-share"])},
          Number(args.offset)
      ).map((p) => ({...p, size: p.items, lines: p.items}))
    : heldOutDemoProblems(
          count,
          {
              minSteps: Number(args["min-steps"]),
              maxSteps: Number(args["max-steps"]),
              minVars: Number(args["min-vars"]),
              maxVars: Number(args["max-vars"])
          },
          Number(args.offset)
      ).map((p) => ({...p, size: p.steps, lines: p.steps}));
const modelPath = args.model ?? path.join(repoRoot, "resources", "models", merge ? "ponder-merge.gguf" : "ponder-demo.gguf");

const llama = await getLlama({gpu: false, build: "never"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: Number(args["context-size"]), sequences: 1});
const session = new LlamaChatSession({contextSequence: context.getSequence()});

let correct = 0;
let exactThinking = 0;
let thinkingTokens = 0;
const started = Date.now();
for (const [i, problem] of problems.entries()) {
    session.setChatHistory([]);
    let thinking = "";
    let answer = "";
    let thoughtTokens = 0;
    await session.promptWithMeta(problem.question, {
        temperature: 0,
        maxTokens: 20 * problem.size + 100,
        onResponseChunk(chunk) {
            if (chunk.type === "segment" && chunk.segmentType === "thought") {
                thinking += chunk.text;
                thoughtTokens += chunk.tokens.length;
            } else answer += chunk.text;
        }
    });
    const ok = isDemoAnswerCorrect(problem, answer);
    const exact = thinking.trim() === problem.thinking;
    correct += ok ? 1 : 0;
    exactThinking += exact ? 1 : 0;
    thinkingTokens += thoughtTokens;
    if (args.verbose || !ok)
        console.log(
            `#${i} seed ${problem.seed} size ${problem.size}: answer ${JSON.stringify(extractDemoAnswer(answer))} ` +
                `expected ${problem.answer} ${ok ? "ok" : "WRONG"}; thinking ${thoughtTokens} tokens, ` +
                `${demoThinkingPrefixLines(problem, thinking)}/${problem.lines} lines right`
        );
}

console.log(
    JSON.stringify({
        model: path.relative(repoRoot, modelPath),
        task: args.task,
        problems: count,
        ...(merge
            ? {items: [Number(args["min-items"]), Number(args["max-items"])]}
            : {steps: [Number(args["min-steps"]), Number(args["max-steps"])], vars: [Number(args["min-vars"]), Number(args["max-vars"])]}),
        kvCache: "full",
        accuracy: correct / count,
        exactThinking: exactThinking / count,
        meanThinkingTokens: Math.round(thinkingTokens / count),
        seconds: Math.round((Date.now() - started) / 1000)
    })
);

session.dispose();
await context.dispose();
await model.dispose();
await llama.dispose();
