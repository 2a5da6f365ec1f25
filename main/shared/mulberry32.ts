// The seeded PRNG behind the demo tasks' problems, calibration's sampling and training, and the generated fixtures
// (bit-exact with test/eval/train/task.py). Pure: it runs in the main process (the demo tasks) and in the engine
// process (calibration) alike.

/** mulberry32: uniform floats in [0, 1), bit-exact with test/eval/train/task.py. */
export function mulberry32(seed: number) {
    let state = seed >>> 0;
    const uniform = () => {
        state = (state + 0x6d2b79f5) >>> 0;
        let t = state;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    return {uniform, int: (n: number) => Math.floor(uniform() * n)};
}
