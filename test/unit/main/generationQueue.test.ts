import {describe, expect, it} from "vitest";
import {GenerationQueue, QueueAbortError} from "../../../main/services/GenerationQueue.js";

describe("the generation queue", () => {
    it("runs one at a time, first come first served, and refuses callers past its bound", async () => {
        const queue = new GenerationQueue(2);
        const order: string[] = [];
        let finishFirst!: () => void;
        const first = queue.run(
            () =>
                new Promise<void>((resolve) => {
                    order.push("a");
                    finishFirst = resolve;
                })
        );
        await Promise.resolve();
        const second = queue.run(async () => void order.push("b"));
        const third = queue.run(async () => void order.push("c"));
        expect(queue.full).toBe(true);
        await expect(queue.acquire()).rejects.toMatchObject({code: "BUSY"});
        expect(order).toEqual(["a"]);
        finishFirst();
        await Promise.all([first, second, third]);
        expect(order).toEqual(["a", "b", "c"]);
        expect(queue.running).toBe(false);
    });

    it("drops a caller whose signal aborts while it waits, and hands the turn on when a task fails", async () => {
        const queue = new GenerationQueue(4);
        const release = await queue.acquire();
        const abort = new AbortController();
        const waiting = queue.acquire(abort.signal);
        const next = queue.run(async () => "ran");
        expect(queue.waiting).toBe(2);
        abort.abort();
        await expect(waiting).rejects.toBeInstanceOf(QueueAbortError);
        expect(queue.waiting).toBe(1);
        release();
        release(); // a second release is ignored
        await expect(next).resolves.toBe("ran");
        await expect(
            queue.run(async () => {
                throw new Error("boom");
            })
        ).rejects.toThrow("boom");
        await expect(queue.run(async () => "after")).resolves.toBe("after");
    });
});
