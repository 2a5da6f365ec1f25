// What per-head cells cost where the cache is not in this process's memory: the merge model split across two
// rpc-servers on loopback (every layer but the first on the servers, as test/engine/rpcSplit.test.ts splits it), one
// held-out merge problem at half of Full's cells, greedy, TRIM-KV (the model's calibrated gates) and H2O on shared and
// on per-head cells; prints the seconds of each answer. The heads a round moves in a remote layer are read and written
// back over the link (native/patches/0015):
//
//   npx tsx scripts/rpcHeadMoves.ts
import path from "node:path";
import {EngineProxy} from "../main/engine/host/EngineProxy.js";
import {inspectModel} from "../main/engine/runtime/inspectModel.js";
import {heldOutMergeProblems} from "../test/eval/mergeTask.js";
import {REPO_ROOT} from "../test/fixtures/gguf/fixtures.js";
import {startRpcServer} from "../test/fixtures/rpcServers.js";
import {spawnTestEngine} from "../test/engine/spawnTestEngine.js";
import {greedyAnswer} from "../test/engine/greedyAnswer.js";

const mergeModel = path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf");
const problem = heldOutMergeProblems(1, {minItems: 24, maxItems: 30}, 77)[0]!;
const servers = [await startRpcServer(), await startRpcServer()];
const split = new EngineProxy({spawn: spawnTestEngine(), runtime: {build: "cpu", rpcServers: servers.map((s) => s.endpoint)}});
await split.start();
const layers = (await inspectModel(mergeModel)).layers!;
await split.loadModel(mergeModel, null, {gpuLayers: layers - 1});
const full = await greedyAnswer(split, problem.question, "full", 4096, {maxTokens: 1024});
const cells = Math.ceil((full.promptTokens + full.tokens) / 2);
for (const [policy, combine] of [
    ["trimkv", "aggregate"],
    ["trimkv", "heads"],
    ["h2o", "aggregate"],
    ["h2o", "heads"]
] as const) {
    const started = performance.now();
    const run = await greedyAnswer(split, problem.question, policy, cells, {maxTokens: 1024, compression: {combine}});
    console.log(`${policy} ${combine}: ${run.tokens} tokens in ${((performance.now() - started) / 1000).toFixed(2)} s`);
}
await split.dispose();
for (const s of servers) s.child.kill("SIGKILL");
