import {resolveChatWrapper, type Token} from "node-llama-cpp";
import {loadPatchedLlama} from "../../../main/engine/native/loadPatchedLlama.js";
import {fullTrace} from "../../../main/engine/fidelity.js";
import {heldOutDemoProblems} from "../../eval/demoTask.js";
const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
const model = await llama.loadModel({modelPath: "resources/models/ponder-demo.gguf"});
const wrapper = resolveChatWrapper(model);
const p = heldOutDemoProblems(1)[0]!;
const prompt: Token[] = wrapper.generateContextState({chatHistory: [{type: "user", text: p.question}, {type: "model", response: []}]}).contextText.tokenize(model.tokenizer);
for (const attention of [false, true]) {
    const ref = await fullTrace(model, prompt, 1200, 2, {attention});
    const text = model.detokenize(ref.tokens, true);
    console.log(attention, p.answer, JSON.stringify(text.slice(text.indexOf("</think>") - 20, text.indexOf("</think>") + 14)));
}
