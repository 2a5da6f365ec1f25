export declare const nativeDir: string;
export declare const patchesDir: string;
export declare const seriesPath: string;
export declare const patchTargets: readonly ["llama.cpp", "addon"];
export declare function readSeries(): {file: string; target: "llama.cpp" | "addon"; path: string}[];
export declare function computeSeriesHash(nodeLlamaCppVersion: string): string;
