// A long answer is saved as it streams without rewriting what was saved before: the bytes the database writes grow
// with the answer, not with the answer times the number of saves. Measured in the bytes this process writes
// (Linux's /proc/self/io), for 8k- and 32k-token thoughts saved every 250 ms at 30 tokens/s. Rewriting the whole
// answer at each save wrote 311 MiB for the 32k-token one.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import type {GenerateRequest, GenerationResult} from "../../../main/engine/EngineApi.js";
import {FakeEngine} from "./FakeEngine.js";

const tokenText = " abc";

function writtenBytes(): number {
    return Number(/wchar: (\d+)/.exec(fs.readFileSync("/proc/self/io", "utf8"))![1]);
}

/** Streams `tokens` thought tokens at once, the clock moving 33 ms a token (30 tokens/s). */
class LongEngine extends FakeEngine {
    tokens = 0;

    constructor(private readonly _clock: {now: number}) {
        super();
    }

    override async generate(request: GenerateRequest): Promise<GenerationResult> {
        for (let index = 0; index < this.tokens; index++) {
            this._clock.now += 33;
            request.onChunk({segment: "thought", text: tokenText, tokens: 1});
        }
        request.onChunk({segment: "answer", text: "The answer is 4", tokens: 4});
        return {stopReason: "eogToken", promptTokens: 5};
    }
}

describe.runIf(fs.existsSync("/proc/self/io"))("saving a streaming answer", () => {
    it("writes in proportion to the answer, not to the answer times the saves, and keeps every token", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-writes-"));
        const clock = {now: 1_000_000};
        const db = new AppDatabase(path.join(dir, "ponder.sqlite"));
        const engine = new LongEngine(clock);
        const services = new AppServices(db, engine.asEngine(), () => {}, {version: "t", modelsDir: dir, now: () => clock.now});
        const written = new Map<number, number>();
        try {
            for (const tokens of [8192, 32_768]) {
                engine.tokens = tokens;
                const conversation = services.conversations.create(`${tokens}`);
                const before = writtenBytes();
                services.chat.send(conversation.id, "Think long");
                await services.chat.idle();
                written.set(tokens, writtenBytes() - before);
                const answer = services.conversations.get(conversation.id).messages.at(-1)!;
                expect(answer.status).toBe("complete");
                expect(answer.thinking).toBe(tokenText.repeat(tokens));
                expect(answer.thinkingTokens).toBe(tokens);
                console.log(
                    `${tokens}-token answer (${((tokens * tokenText.length) / 1024).toFixed(0)} KiB): ${(written.get(tokens)! / 2 ** 20).toFixed(1)} MiB written`
                );
            }
            // Four times the answer (and the saves), about four times the bytes: rewriting it each time would be sixteen.
            expect(written.get(32_768)! / written.get(8192)!).toBeLessThan(6);
            // A page or two of the write-ahead log per save, then the answer once more at the end.
            expect(written.get(32_768)!).toBeLessThan(64 * 2 ** 20);
        } finally {
            await services.dispose();
            fs.rmSync(dir, {recursive: true, force: true});
        }
    });
});
