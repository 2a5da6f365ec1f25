import {trimkvReleases, type TrimkvRelease} from "./trimkvReleases.js";

/** What a GGUF says of itself that a release is matched on (a ModelInspection has it all). */
export type ReleaseMatchInput = {
    architecture: string | null;
    layers: number | null;
    embeddingLength: number | null;
    headCount: number | null;
    headCountKv: number | null;
    /** `general.name` (else the file name). */
    name: string;
    /** The GGUF's path: its file name is read as a second name. */
    path: string;
};

/** The releases offered for a model, and, when the model's names do not single one out, why these are offered. */
export type ReleaseMatch = {releases: TrimkvRelease[]; why: string | null};

/**
 * The released TRIM-KV gates whose base model has this model's shape (architecture, layers, width, heads, KV heads).
 * Where several releases share the shape (Qwen3-4B and Qwen3-4B-Instruct-2507), the model's name and file name pick the
 * one they name; when they name none, all of that shape are offered with the reason, and so is a lone release whose
 * base model the names do not name (another model of the same shape, such as Phi-3-mini-4k, gets gates not trained for it).
 */
export function matchTrimkvReleases(model: ReleaseMatchInput, releases: readonly TrimkvRelease[] = trimkvReleases): ReleaseMatch {
    const shaped = releases.filter(
        (release) =>
            release.architecture === model.architecture &&
            release.layers === model.layers &&
            release.embeddingLength === model.embeddingLength &&
            release.headCount === model.headCount &&
            release.headCountKv === model.headCountKv
    );
    if (shaped.length === 0) return {releases: [], why: null};
    const names = [model.name, model.path.split(/[\\/]/).at(-1) ?? ""].map(words);
    const named = shaped.filter((release) =>
        names.some(
            (name) =>
                release.nameHints.every((hint) => name.includes(` ${hint} `)) &&
                !(release.nameExcludes ?? []).some((word) => name.includes(` ${word} `))
        )
    );
    if (named.length === 1) return {releases: named, why: null};
    const bases = shaped.map((release) => baseName(release)).join(" and ");
    if (shaped.length === 1)
        return {
            releases: shaped,
            why:
                `This model has the shape of ${bases}, but its name ("${model.name}") does not say it is that model: ` +
                "the gates were trained on it and may not suit another model of the same shape."
        };
    return {
        releases: shaped,
        why:
            `${bases} have this model's shape, and its name ("${model.name}") does not say which it is: ` +
            "take the gates of the model it was made from."
    };
}

/** Lower case, with `-`, `_`, `.` and other separators as spaces, padded with a space at each end. */
function words(text: string): string {
    return ` ${text
        .toLowerCase()
        .replace(/\.gguf$/, "")
        .replace(/[^a-z0-9]+/g, " ")
        .trim()} `;
}

function baseName(release: TrimkvRelease): string {
    return release.baseModel.split("/").at(-1)!;
}
