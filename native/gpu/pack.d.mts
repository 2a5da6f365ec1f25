/** The archive's top folder. */
export declare const packFolder: string;
/** Whether a path of llama.cpp's source (relative, `/`-separated) goes into the archive. */
export declare function keepSourcePath(rel: string): boolean;
