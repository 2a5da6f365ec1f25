import {z} from "zod";
import {kvBounds} from "../preload/kvBounds.js";

// A KV budget's schema, written once: the IPC and stored settings take it as it is (main/services/schemas.ts), the
// OpenAI extension object without its `kind` (main/server/openaiSchemas.ts: `{cells}` or `{mib}`).

/** A KV budget: auto, a number of cells within `kvBounds`, or a size in MiB up to 1 TiB. */
export const kvBudgetSchema = z.discriminatedUnion("kind", [
    z.object({kind: z.literal("auto")}).strict(),
    z
        .object({
            kind: z.literal("cells"),
            cells: z
                .number()
                .int()
                .min(kvBounds.minCells, `A KV budget below ${kvBounds.minCells} cells cannot hold a prompt and a recent window`)
                .max(kvBounds.maxCells, `A KV budget above ${kvBounds.maxCells} cells is more than any model here can address`)
        })
        .strict(),
    z
        .object({
            kind: z.literal("mib"),
            mib: z.number().positive("A KV budget must be more than 0 MiB").max(kvBounds.maxMib, "A KV budget above 1 TiB is not a budget")
        })
        .strict()
]);
