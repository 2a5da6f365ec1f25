import {createModelDownloader} from "node-llama-cpp";

export type ModelDownload = {
    totalBytes: number;
    /** Starts the transfer (resuming a partial file in the same folder); resolves to the downloaded file's path. */
    start(): Promise<string>;
    /** Stops the transfer; `discard` also deletes the partial file, which otherwise stays for a resume. */
    cancel(options?: {discard?: boolean}): Promise<void>;
};

/** Reads a download's size and file name with node-llama-cpp's downloader; nothing is transferred until `start()`. */
export async function startModelDownload(
    uri: string,
    dirPath: string,
    onProgress: (downloaded: number, total: number) => void
): Promise<ModelDownload> {
    const downloader = await createModelDownloader({
        modelUri: uri,
        dirPath,
        showCliProgress: false,
        skipExisting: true,
        deleteTempFileOnCancel: false,
        onProgress: ({downloadedSize, totalSize}) => onProgress(downloadedSize, totalSize)
    });
    return {
        totalBytes: downloader.totalSize,
        start: () => downloader.download(),
        cancel: (options) => downloader.cancel({deleteTempFile: options?.discard === true})
    };
}

/** Several files downloading as one: `start()` resolves to their paths, in the order asked for. */
export type FilesDownload = Omit<ModelDownload, "start"> & {start(): Promise<string[]>};

/**
 * Several files into one folder as one download (each with node-llama-cpp's downloader, one after another): the sizes
 * and the progress are the sum of the files'; `start()` resolves to the files' paths, in the order given.
 */
export async function startFilesDownload(
    uris: string[],
    dirPath: string,
    onProgress: (downloaded: number, total: number) => void
): Promise<FilesDownload> {
    const done: number[] = uris.map(() => 0);
    const downloads: ModelDownload[] = [];
    const report = () =>
        onProgress(
            done.reduce((sum, bytes) => sum + bytes, 0),
            total()
        );
    const total = () => downloads.reduce((sum, download) => sum + download.totalBytes, 0);
    try {
        for (const [index, uri] of uris.entries())
            downloads.push(
                await startModelDownload(uri, dirPath, (downloaded) => {
                    done[index] = downloaded;
                    report();
                })
            );
    } catch (err) {
        for (const download of downloads) await download.cancel().catch(() => {});
        throw err;
    }
    return {
        totalBytes: total(),
        start: async () => {
            const files: string[] = [];
            for (const [index, download] of downloads.entries()) {
                files.push(await download.start());
                done[index] = download.totalBytes;
                report();
            }
            return files;
        },
        cancel: async (options) => {
            for (const download of downloads) await download.cancel(options);
        }
    };
}
