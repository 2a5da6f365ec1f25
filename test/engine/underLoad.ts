import {Worker} from "node:worker_threads";

/** Keeps the machine busy while `work` runs: a spinning worker thread and a main thread that stalls every few ms. */
export async function underLoad<T>(work: () => Promise<T>): Promise<T> {
    const worker = new Worker("const end = Date.now() + 120_000; while (Date.now() < end) {}", {eval: true});
    const stall = setInterval(() => {
        const end = performance.now() + 3 + Math.random() * 6;
        while (performance.now() < end) {
            // busy: the event loop cannot run decode callbacks or prune rounds meanwhile
        }
    }, 2);
    try {
        return await work();
    } finally {
        clearInterval(stall);
        await worker.terminate();
    }
}
