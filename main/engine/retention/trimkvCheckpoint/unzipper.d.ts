// The part of unzipper's API (0.12, CommonJS, no types of its own) that readTorchStateDict uses.
declare module "unzipper" {
    import type {Readable} from "node:stream";

    export type CentralDirectoryEntry = {
        path: string;
        type: "File" | "Directory";
        flags: number;
        compressionMethod: number;
        compressedSize: number;
        uncompressedSize: number;
        crc32: number;
        offsetToLocalFileHeader: number;
        stream(password?: string): Readable;
    };

    export type CentralDirectory = {
        numberOfRecords: number;
        offsetToStartOfCentralDirectory: number;
        files: CentralDirectoryEntry[];
    };

    const unzipper: {
        Open: {
            file(filePath: string): Promise<CentralDirectory>;
        };
    };
    export default unzipper;
}
