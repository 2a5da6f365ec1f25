import {problemSets, type TaskModel} from "./quality.js";

const taskModels: TaskModel[] = ["demo", "merge", "multi", "recur"];

/**
 * `--models` and `--sets` resolved once: the task models named (null where `--models` is not given: the fidelity suite
 * then keeps its random-weights table), each with the problem set of its own task (the fidelity suite's problems), and
 * the problem sets the quality and foresight suites run. Without `--sets`, those are every set of the models named
 * (`demo`: the demo and local sets; `merge`: the merge sets; `multi`: a set per family) but those run by name only;
 * without either flag, the demo model's. `--sets` named
 * beside `--models` must name sets of those models only.
 */
export function benchModels(flags: {models?: string; sets?: string}): {
    models: {name: TaskModel; set: string}[] | null;
    sets: string[];
} {
    const models = flags.models == null ? null : listOf(flags.models, "--models");
    for (const name of models ?? []) {
        if (!taskModels.includes(name as TaskModel)) throw new Error(`Unknown model ${name} in --models: ${taskModels.join(", ")}`);
    }
    const named = (models ?? ["demo"]) as TaskModel[];
    const sets =
        flags.sets == null
            ? Object.keys(problemSets).filter((set) => named.includes(problemSets[set]!.model) && problemSets[set]!.byName !== true)
            : listOf(flags.sets, "--sets");
    for (const set of sets) {
        const known = problemSets[set];
        if (known == null) throw new Error(`Unknown problem set ${set}: ${Object.keys(problemSets).join(", ")}`);
        if (models != null && !named.includes(known.model))
            throw new Error(`The problem set ${set} runs on the ${known.model} model, which --models ${flags.models} leaves out`);
    }
    return {models: models == null ? null : named.map((name) => ({name, set: ownSet(name)})), sets};
}

/** The problem set of the model's own task: the set named after the model (the demo set is the demo task's training distribution). */
function ownSet(model: TaskModel): string {
    if (problemSets[model]?.model !== model) throw new Error(`No problem set of the ${model} model's own task`);
    return model;
}

function listOf(flag: string, name: string): string[] {
    const list = flag.split(",").filter((item) => item !== "");
    if (list.length === 0) throw new Error(`${name} names nothing`);
    if (new Set(list).size !== list.length) throw new Error(`${name} names ${flag}: one of them twice`);
    return list;
}
