import type {EngineStatus} from "../../../preload/contract.js";
import type {Engine} from "../../../main/engine/Engine.js";
import type {GenerateRequest, GenerationResult, ModelInspection} from "../../../main/engine/types.js";

/** An engine double that streams a scripted thought and answer, one token per chunk, one chunk per tick. */
export class FakeEngine {
    inspection: ModelInspection | null = {
        path: "/m.gguf", name: "fake", sizeBytes: 1, architecture: "llama", contextLength: 4096,
        layers: 2, headCount: 2, headCountKv: 1, embeddingLength: 8, hasChatTemplate: true
    };
    status: EngineStatus = {state: "ready", build: null, model: null, progress: null, message: null};
    requests: GenerateRequest[] = [];
    thought = ["Let", " me", " think"];
    answer = ["The", " answer", " is", " 4"];
    failWith: Error | null = null;

    onStatus(): () => void {
        return () => {};
    }

    async generate(request: GenerateRequest): Promise<GenerationResult> {
        this.requests.push(request);
        const chunks = [
            ...this.thought.map((text) => ({segment: "thought" as const, text, tokens: 1})),
            ...this.answer.map((text) => ({segment: "answer" as const, text, tokens: 1}))
        ];
        for (const [index, chunk] of chunks.entries()) {
            await new Promise((resolve) => setTimeout(resolve, 1));
            if (request.signal.aborted)
                return {stopReason: "abort", promptTokens: 5};
            if (this.failWith != null && index === 2)
                throw this.failWith;
            request.onChunk(chunk);
        }
        return {stopReason: "eogToken", promptTokens: 5};
    }

    async dispose(): Promise<void> {}

    asEngine(): Engine {
        return this as unknown as Engine;
    }
}
