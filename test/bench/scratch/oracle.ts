import {resolveChatWrapper, type Token} from "node-llama-cpp";
import {loadPatchedLlama} from "../../../main/engine/native/loadPatchedLlama.js";
import {fullTrace, measureFidelity} from "../../../main/engine/fidelity.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import {heldOutDemoProblems} from "../../eval/demoTask.js";
const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
const model = await llama.loadModel({modelPath: "resources/models/ponder-demo.gguf"});
const wrapper = resolveChatWrapper(model);
const share = Number(process.argv[2] ?? 0.5);
for (const p of heldOutDemoProblems(Number(process.argv[3] ?? 3))) {
    const prompt: Token[] = wrapper.generateContextState({chatHistory: [{type: "user", text: p.question}, {type: "model", response: [{type: "segment", segmentType: "thought", text: "", ended: false}]}]}).contextText.tokenize(model.tokenizer);
    const ref = await fullTrace(model, prompt, 1400, 2, {attention: true});
    const endAt = ref.tokens.findIndex((t) => model.detokenize([t], true).includes("<|im_end|>"));
    const steps = endAt + 1;
    const r = {...ref, tokens: ref.tokens.slice(0, steps), logProbs: ref.logProbs.slice(0, steps), attention: ref.attention!.slice(0, steps)};
    const cells = Math.round((prompt.length + steps) * share);
    const rep = await measureFidelity({model, prompt, steps, reference: r, cells, threads: 2, compression: {...defaultCompressionSettings, policy: "streamingllm", pruneEvery: 8}, oracle: true});
    console.log(p.answer, JSON.stringify(model.detokenize(r.tokens, true).slice(-30)), JSON.stringify(rep.greedyText.slice(-30)), rep.top1Agreement.toFixed(3), rep.firstDivergence, cells);
}
