import type {CompressionSettings, MessageStats, VersionComparison} from "../../preload/contract.js";
import {policyEntry} from "../../preload/policyCatalogue.js";
import {AppError} from "../AppError.js";
import type {MessageRow} from "../db/types.js";
import {compareVersions} from "./compareVersions.js";
import {parseCompression} from "./dto.js";
import {parseSamples} from "./pushSample.js";

/** A Full KV run that checks an answer made under a pruning policy: its compression and seed, and the answer it checks. */
export type CompareRun = {compression: CompressionSettings; seed: number; comparedWith: string};

/** Full KV with `answer`'s cache types and seed: refused for a question, a Full KV answer, or one whose seed was not kept. */
export function compareRunFor(answer: MessageRow): CompareRun {
    const record = parseCompression(answer.compression);
    if (answer.role !== "assistant" || record == null || policyEntry(record.policy).keepsEveryToken)
        throw new AppError("BAD_REQUEST", "Compare with Full KV needs an answer made under a pruning policy");
    if (record.seed == null || record.settings == null)
        throw new AppError("BAD_REQUEST", "This answer was made before Ponder kept its seed: regenerate it, then compare");
    return {compression: {...record.settings, policy: "full", budget: {kind: "auto"}}, seed: record.seed, comparedWith: answer.id};
}

/** How a Full KV version (`full`, its stats) compares with the version `checked` it checks; `undefined` when that is gone. */
export function versionComparison(
    checked: MessageRow | undefined,
    full: {text: string; thinking: string},
    stats: MessageStats | null
): VersionComparison | undefined {
    const record = checked != null ? parseCompression(checked.compression) : null;
    if (checked == null || record == null) return undefined;
    return {
        messageId: checked.id,
        policy: record.policy,
        ...compareVersions(checked, full),
        prunedLiveBytes: parseSamples(checked.stats).at(-1)?.liveBytes ?? null,
        fullLiveBytes: stats?.samples.at(-1)?.liveBytes ?? null
    };
}
