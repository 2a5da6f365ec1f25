import {createModelDownloader} from "node-llama-cpp";

export type ModelDownload = {
    totalBytes: number,
    /** Resolves to the downloaded file's path. */
    done: Promise<string>,
    cancel(): Promise<void>
};

/** Starts a download with node-llama-cpp's downloader; a partial file left by a cancel is resumed next time. */
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
        done: downloader.download(),
        cancel: () => downloader.cancel({deleteTempFile: false})
    };
}
