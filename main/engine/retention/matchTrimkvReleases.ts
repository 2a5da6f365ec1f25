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

/**
 * The releases offered for a model, and why in words when the model's names do not single one out: several of its
 * shape, one its name does not name, one its name names with more besides (another fine-tune of that model), or none
 * at all (the nearest release and how its shape differs).
 */
export type ReleaseMatch = {releases: TrimkvRelease[]; why: string | null};

/** The shape a release is matched on, with the words that name each part in the reasons. */
const shapeParts = [
    ["architecture", "architecture"],
    ["layers", "layers"],
    ["embeddingLength", "width"],
    ["headCount", "heads"],
    ["headCountKv", "KV heads"]
] as const;

/**
 * Words a GGUF's name or file name holds beside the model's own that do not make it another model: quantization and
 * file-format tags (`Q4_K_M`, `IQ4_XS`, `UD`, `BF16`, `i1`) and split-file counters (`00001-of-00003`).
 */
const neutralWord = /^(?:i?q\d+|tq\d+|k|s|m|l|xs|xxs|xl|nl|\d|f16|f32|bf16|fp16|fp8|mxfp4|gguf|ggml|ud|imat|imatrix|i1|\d+bit|\d{5}|of)$/;

/**
 * The released TRIM-KV gates whose base model has this model's shape (architecture, layers, width, heads, KV heads).
 * Where several releases share the shape (Qwen3-4B and Qwen3-4B-Instruct-2507), the model's name and file name pick the
 * one they name; when they name none, all of that shape are offered with the reason, and so is a lone release whose
 * base model the names do not name (another model of the same shape, such as Phi-3-mini-4k, gets gates not trained for
 * it), or name with more besides (DeepSeek-R1-0528-Qwen3-8B, a fine-tune of Qwen3-8B, against Qwen3-8B's gates). A
 * model of no release's shape gets no release and the nearest one's differences in words.
 */
export function matchTrimkvReleases(model: ReleaseMatchInput, releases: readonly TrimkvRelease[] = trimkvReleases): ReleaseMatch {
    const shaped = releases.filter((release) => shapeDifferences(release, model).length === 0);
    if (shaped.length === 0) return {releases: [], why: nearestRelease(model, releases)};
    const names = [...new Set([model.name, model.path.split(/[\\/]/).at(-1) ?? ""])];
    // For each release of the shape, the names that name it, each with the words it holds besides the model's own.
    const named = shaped
        .map((release) => ({
            release,
            naming: names.flatMap((name) => {
                const text = words(name);
                const namesIt =
                    release.nameHints.every((hint) => text.includes(` ${hint} `)) &&
                    !(release.nameExcludes ?? []).some((word) => text.includes(` ${word} `));
                return namesIt ? [{name, besides: wordsBesides(text, release)}] : [];
            })
        }))
        .filter(({naming}) => naming.length > 0);
    const plain = named.filter(({naming}) => naming.every(({besides}) => besides.length === 0));
    if (plain.length === 1) return {releases: [plain[0]!.release], why: null};
    if (plain.length === 0 && named.length === 1) {
        const {release, naming} = named[0]!;
        const {name, besides} = naming.find(({besides}) => besides.length > 0)!;
        const base = baseName(release);
        return {
            releases: [release],
            why:
                `Its name ("${name}") names ${base} with more besides ("${besides.join(" ")}"): it may be a fine-tune of ${base}, ` +
                `and the gates were trained on ${base} itself, so they may not suit it.`
        };
    }
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

/** The parts of the shape in which the release's base model differs from the model, in words; empty when none does. */
function shapeDifferences(release: TrimkvRelease, model: ReleaseMatchInput): string[] {
    return shapeParts.flatMap(([key, what]) =>
        model[key] === release[key] ? [] : [`${what} (${release[key]}, this model ${model[key] ?? "does not say"})`]
    );
}

/**
 * Why no release fits, in words: the release whose base model is nearest to the model's shape (the same architecture
 * first, then the fewest parts that differ, then the smallest ratios between them) and what differs.
 */
function nearestRelease(model: ReleaseMatchInput, releases: readonly TrimkvRelease[]): string | null {
    const distance = (release: TrimkvRelease): number[] => {
        const numeric = (["layers", "embeddingLength", "headCount", "headCountKv"] as const).map(
            (key) => [release[key], model[key]] as const
        );
        return [
            release.architecture === model.architecture ? 0 : 1,
            numeric.filter(([theirs, own]) => theirs !== own).length,
            numeric.reduce((sum, [theirs, own]) => sum + (own == null || own <= 0 ? 10 : Math.abs(Math.log(theirs / own))), 0)
        ];
    };
    const nearest = releases
        .map((release) => ({release, distance: distance(release)}))
        .sort((a, b) => {
            const i = a.distance.findIndex((d, k) => d !== b.distance[k]);
            return i < 0 ? 0 : a.distance[i]! - b.distance[i]!;
        })[0]?.release;
    if (nearest == null) return null;
    return (
        `No TRIM-KV gates were released for a model of this shape. The nearest release, ${nearest.repo} (for ` +
        `${baseName(nearest)}), differs in ${listWords(shapeDifferences(nearest, model))}.`
    );
}

/** "a", "a and b", "a, b and c". */
function listWords(items: string[]): string {
    return items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}

/** The words of a name (as `words` gives them) that are neither the release's base model's nor its hints nor neutral. */
function wordsBesides(text: string, release: TrimkvRelease): string[] {
    const own = new Set([release.baseModel, ...release.nameHints].flatMap((part) => words(part).trim().split(" ")));
    return text
        .trim()
        .split(" ")
        .filter((word) => word !== "" && !own.has(word) && !neutralWord.test(word));
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
