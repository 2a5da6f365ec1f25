import {createModelDownloader} from "node-llama-cpp";

export type ModelDownload = {
    totalBytes: number,
    /** Starts the transfer (resuming a partial file in the same folder); resolves to the downloaded file's path. */
    start(): Promise<string>,
    /** Stops the transfer; `discard` also deletes the partial file, which otherwise stays for a resume. */
    cancel(options?: {discard?: boolean}): Promise<void>
};

/** Reads a download's size and file name with node-llama-cpp's downloader; nothing is transferred until `start()`. */
export async function startModelDownload(uri: string, dirPath: string, onProgress: (downloaded: number, total: number) => void): Promise<ModelDownload> {
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
