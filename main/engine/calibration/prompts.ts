import {generateDemoProblem} from "../../demo/demoTask.js";
import {generateMergeProblem} from "../../demo/mergeTask.js";
import {generateMultiProblem, MULTI_FAMILIES, type MultiFamily} from "../../demo/multiTask.js";
import {mulberry32} from "../../shared/mulberry32.js";

// The prompts a model thinks through to calibrate its retention gates: reasoning problems in English made
// from templates and a seed (arithmetic and word problems, logic puzzles, code tracing, planning, unit conversions),
// written here, no data set copied; for the task models Ponder ships (the demo model, the merge model, the many-task
// model), which read nothing but their own tasks, their training problems. Every list is a pure function of its seed.

export type SeededPrompt = {
    /** Which template made it (`"demo"` for the demo task, `"merge"` for the merge task, the family for the many-task model). */
    kind: string;
    /** The user message. */
    user: string;
    /** The seed that made it: the same seed and kind give the same text. */
    seed: number;
};

/**
 * Which prompts a calibration uses: Ponder's English set, the own task of the demo, merge or many-task model, or
 * questions the model writes itself (`ownPrompts.ts`), or a person's own from a file (`promptsFile.ts`; neither made here).
 */
export type PromptSet = "english" | "demo" | "merge" | "multi" | "own" | "file" | "conversations" | "traces";

/** Demo-task seeds trained on: from here up (scripts/retention/traces.py's DEMO_TRAIN_SEED_BASE). */
export const demoTrainingSeedBase = 1_000_000_000;
/** Demo-task seeds held out of training for validation (traces.py's DEMO_VALIDATION_SEED_BASE); still below 2^30. */
export const demoValidationSeedBase = 1_000_050_000;
/** The bench's LeanKV calibration starts here (test/bench/precision.ts) and the held-out problems at 2^31: stay below. */
const demoSeedLimit = 0x40000000;

/** Seeds of the held-out English prompts are the training seeds with this bit set: the two lists never share a seed. */
const heldOutBit = 0x40000000;

/**
 * `count` calibration prompts of `set`, the `index`-th made from seed `seed + index` (English) or, for a task set,
 * problem `demoTrainingSeedBase + seed * 1000 + index` of that task (the same training seeds for both tasks); `heldOut`
 * gives prompts the training list never contains, for validation.
 */
export function calibrationPrompts(set: PromptSet, count: number, seed: number, heldOut = false): SeededPrompt[] {
    if (!Number.isInteger(count) || count < 0) throw new RangeError("count must be a whole number");
    if (!Number.isInteger(seed) || seed < 0 || seed >= 50) throw new RangeError("the calibration seed must be a whole number from 0 to 49");
    if (set === "own" || set === "file" || set === "conversations" || set === "traces")
        throw new RangeError(`the ${set} set's prompts are not made from a seed`);
    if (set === "multi") return multiTaskPrompts(count, seed, heldOut);
    if (set === "demo" || set === "merge") {
        const base = taskSeedBase(set, count, seed, heldOut);
        const question = set === "demo" ? (s: number) => generateDemoProblem(s).question : (s: number) => generateMergeProblem(s).question;
        return Array.from({length: count}, (_, i) => ({kind: set, user: question(base + i), seed: base + i}));
    }
    return Array.from({length: count}, (_, i) => {
        const promptSeed = ((seed * 100_000 + i) | (heldOut ? heldOutBit : 0)) >>> 0;
        return englishPrompt(promptSeed);
    });
}

/**
 * `count` training problems of the many-task model's `families` (every family by default; the kind is each one's
 * family), from the same seeds as the other task sets: a calibration on some families, to measure its gates on the
 * others.
 */
export function multiTaskPrompts(
    count: number,
    seed: number,
    heldOut = false,
    families: readonly MultiFamily[] = MULTI_FAMILIES
): SeededPrompt[] {
    const base = taskSeedBase("multi", count, seed, heldOut);
    return Array.from({length: count}, (_, i) => {
        const problem = generateMultiProblem(base + i, {families});
        return {kind: problem.family, user: problem.question, seed: base + i};
    });
}

/** The first seed of a task set's list: training seeds, or for `heldOut` the validation ones, 1,000 per calibration seed. */
function taskSeedBase(set: string, count: number, seed: number, heldOut: boolean): number {
    if (!Number.isInteger(count) || count < 0) throw new RangeError("count must be a whole number");
    if (!Number.isInteger(seed) || seed < 0 || seed >= 50) throw new RangeError("the calibration seed must be a whole number from 0 to 49");
    const base = (heldOut ? demoValidationSeedBase : demoTrainingSeedBase) + seed * 1000;
    if (count > 1000 || base + count > demoSeedLimit) throw new RangeError(`at most 1,000 ${set}-task prompts per seed`);
    return base;
}

/** One English reasoning prompt: the template is chosen by the seed, and so is everything in it. */
function englishPrompt(seed: number): SeededPrompt {
    const random = mulberry32(seed);
    const template = templates[random.int(templates.length)]!;
    return {kind: template.kind, user: template.make(picker(random)), seed};
}

type Pick = ReturnType<typeof picker>;

function picker(random: ReturnType<typeof mulberry32>) {
    const int = (low: number, high: number) => low + random.int(high - low + 1);
    const one = <T>(items: readonly T[]): T => items[random.int(items.length)]!;
    const some = <T>(items: readonly T[], n: number): T[] => {
        const pool = [...items];
        const out: T[] = [];
        while (out.length < n && pool.length > 0) out.push(pool.splice(random.int(pool.length), 1)[0]!);
        return out;
    };
    return {int, one, some};
}

const names = [
    "Ada",
    "Bruno",
    "Chen",
    "Dalia",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ivo",
    "Jun",
    "Kemal",
    "Lena",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe"
];
const goods = ["apples", "notebooks", "tiles", "bolts", "tickets", "candles", "jars of honey", "seed packets", "bricks", "postcards"];
const places = [
    "the bakery",
    "the library",
    "the station",
    "the harbour",
    "the market",
    "the school",
    "the clinic",
    "the museum",
    "the park",
    "the mill"
];
const colours = ["red", "blue", "green", "yellow", "white", "black", "orange", "purple"];
const pets = ["a cat", "a dog", "a parrot", "a rabbit", "a tortoise", "a goldfish", "a hamster", "a lizard"];
const jobs = ["a baker", "a pilot", "a nurse", "a carpenter", "a teacher", "a chemist", "a painter", "a farmer"];

type Template = {kind: string; make: (p: Pick) => string};

const templates: Template[] = [
    {
        kind: "arithmetic",
        make(p) {
            const terms = Array.from({length: p.int(4, 7)}, () => p.int(2, 999));
            const ops = terms.slice(1).map(() => p.one(["+", "-", "*"]));
            const expression = terms.map((t, i) => (i === 0 ? String(t) : `${ops[i - 1]} ${t}`)).join(" ");
            return `Compute ${expression}, respecting the usual order of operations. Work it out step by step and give the final number.`;
        }
    },
    {
        kind: "word problem",
        make(p) {
            const [a, b, c] = p.some(names, 3);
            const item = p.one(goods);
            const start = p.int(20, 400);
            const gives = p.int(2, 19);
            const buys = p.int(3, 60);
            const price = p.int(2, 25);
            const split = p.int(2, 6);
            return (
                `${a} has ${start} ${item}. ${a} gives ${gives} to each of ${split} friends, then buys ${buys} more at ${price} dollars each. ` +
                `${b} has twice as many ${item} as ${a} has now, and ${c} has ${p.int(5, 50)} fewer than ${b}. ` +
                `How many ${item} do the three have together, and how much did ${a} spend? Reason it through step by step.`
            );
        }
    },
    {
        kind: "rates",
        make(p) {
            const [a, b] = p.some(names, 2);
            const speedA = p.int(3, 90);
            const speedB = p.int(3, 90);
            const gap = p.int(10, 500);
            const from = p.one(places);
            return (
                `${a} leaves ${from} walking at ${speedA} km per hour. ${p.int(1, 5)} hours later ${b} leaves the same place along the same road at ` +
                `${speedB} km per hour. How far apart are they ${p.int(2, 9)} hours after ${a} left, and if ${b} is faster, when does ${b} catch up? ` +
                `A town lies ${gap} km down the road: who reaches it first? Think step by step.`
            );
        }
    },
    {
        kind: "logic puzzle",
        make(p) {
            const people = p.some(names, 4);
            const owned = p.some(pets, 4);
            const work = p.some(jobs, 4);
            const clues = [
                `${people[0]} does not own ${owned[1]} and is not ${work[2]}.`,
                `The person who owns ${owned[0]} is ${work[1]}.`,
                `${people[2]} owns ${owned[3]}.`,
                `${people[1]} is ${work[0]} and does not own ${owned[0]}.`,
                `${work[3]} owns ${owned[2]}.`,
                `${people[3]} is not ${work[3]}.`
            ];
            return (
                `Four people, ${people.join(", ")}, each own one different pet (${owned.join(", ")}) and have one different job ` +
                `(${work.join(", ")}). Clues:\n${p
                    .some(clues, clues.length)
                    .map((c, i) => `${i + 1}. ${c}`)
                    .join("\n")}\n` +
                `Who owns which pet and has which job? If the clues do not decide it, say what stays open. Reason clue by clue.`
            );
        }
    },
    {
        kind: "ordering",
        make(p) {
            const people = p.some(names, p.int(4, 6));
            const facts: string[] = [];
            for (let i = 0; i + 1 < people.length; i++)
                facts.push(p.one([`${people[i]} is taller than ${people[i + 1]}.`, `${people[i + 1]} is shorter than ${people[i]}.`]));
            return (
                `${p.some(facts, facts.length).join(" ")} Who is the tallest, who is the shortest, and what is the full order? ` +
                `Then say who stands in the middle. Explain each step.`
            );
        }
    },
    {
        kind: "code tracing",
        make(p) {
            const start = p.int(0, 9);
            const limit = p.int(4, 9);
            const mul = p.int(2, 5);
            const mod = p.int(7, 31);
            const add = p.int(1, 9);
            return (
                `What does this Python program print? Trace it line by line, keeping track of every variable.\n\n` +
                `x = ${start}\ntotal = 0\nfor i in range(${limit}):\n    if (x + i) % 2 == 0:\n        x = (x * ${mul} + i) % ${mod}\n` +
                `    else:\n        x = x + ${add}\n    total += x\nprint(x, total)`
            );
        }
    },
    {
        kind: "code tracing",
        make(p) {
            const items = Array.from({length: p.int(5, 8)}, () => p.int(1, 60));
            const threshold = p.int(10, 50);
            return (
                `Trace this JavaScript function by hand for the input [${items.join(", ")}] and say what it returns.\n\n` +
                `function f(xs) {\n  const out = [];\n  let carry = 0;\n  for (const x of xs) {\n    carry += x;\n` +
                `    if (carry > ${threshold}) {\n      out.push(carry);\n      carry = carry % ${p.int(3, 9)};\n    }\n  }\n  return [out, carry];\n}`
            );
        }
    },
    {
        kind: "planning",
        make(p) {
            const tasks = p.some(
                [
                    "paint the fence",
                    "buy paint",
                    "fix the ladder",
                    "clear the garden",
                    "call the plumber",
                    "wash the car",
                    "bake bread",
                    "buy flour",
                    "water the plants",
                    "sort the mail",
                    "charge the drill",
                    "hang the shelf"
                ],
                p.int(5, 7)
            );
            const hours = tasks.map(() => p.int(1, 4));
            const rules = [
                `"${tasks[0]}" must come after "${tasks[1]}".`,
                `"${tasks[2]}" must be done before "${tasks[3]}".`,
                `"${tasks[4]}" cannot be on the same day as "${tasks[0]}".`
            ];
            return (
                `Plan a weekend with these tasks (hours each): ${tasks.map((t, i) => `${t} (${hours[i]} h)`).join(", ")}. ` +
                `Each day has ${p.int(5, 8)} hours of work at most. ${rules.join(" ")} Give an order over Saturday and Sunday that respects every ` +
                `rule, or explain why none does. Think it through step by step.`
            );
        }
    },
    {
        kind: "unit conversion",
        make(p) {
            const km = p.int(3, 400);
            const litres = p.int(4, 80);
            const celsius = p.int(-30, 45);
            const pounds = p.int(1, 300);
            return (
                `Convert, showing each step: ${km} km to miles (1 mile = 1.609 km); ${litres} litres to US gallons (1 gallon = 3.785 litres); ` +
                `${celsius} degrees Celsius to Fahrenheit; ${pounds} pounds to kilograms (1 pound = 0.4536 kg). Then say which car uses less fuel: ` +
                `one that needs ${p.int(4, 12)} litres per 100 km or one that does ${p.int(20, 50)} miles per US gallon.`
            );
        }
    },
    {
        kind: "number puzzle",
        make(p) {
            const a = p.int(2, 9);
            const b = p.int(2, 9);
            const target = a * p.int(3, 12) + b * p.int(3, 12);
            return (
                `Find every pair of whole numbers x, y >= 0 with ${a}x + ${b}y = ${target}. Then find the pair with the smallest x + y. ` +
                `Check each answer by substituting it back. Reason carefully.`
            );
        }
    },
    {
        kind: "schedule",
        make(p) {
            const [a, b, c] = p.some(names, 3);
            const period = [p.int(2, 9), p.int(2, 9), p.int(2, 9)];
            return (
                `${a} visits ${p.one(places)} every ${period[0]} days, ${b} every ${period[1]} days and ${c} every ${period[2]} days. ` +
                `All three were there today, a ${p.one(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"])}. ` +
                `On which day of the week will all three meet there again, and how many times will exactly two of them meet before that? Work it out step by step.`
            );
        }
    },
    {
        kind: "probability",
        make(p) {
            const colour = p.some(colours, 3);
            const counts = colour.map(() => p.int(1, 9));
            const draws = p.int(2, 3);
            return (
                `A bag holds ${colour.map((c, i) => `${counts[i]} ${c}`).join(", ")} marbles. You draw ${draws} without putting them back. ` +
                `What is the probability that all are ${colour[0]}? That at least one is ${colour[1]}? Give exact fractions and reason step by step.`
            );
        }
    }
];
