/**
 * Where a trained budget comes from, in one line: `memory_size` in the config.json of the authors' converted gates, else
 * the budget the gates' training recorded.
 */
export function describeTrainedBudget(trained: {cells: number; source: string}): string {
    const origin = trained.source.startsWith("converted from")
        ? "memory_size in the config.json of the authors' released gates"
        : `the budget recorded with the gates (${trained.source})`;
    return `These TRIM-KV gates were trained with ${trained.cells.toLocaleString("en-US")} cells: ${origin}.`;
}
