/** A checkpoint or its config that cannot be converted; the message says why, in words a person can act on. */
export class CheckpointError extends Error {
    override name = "CheckpointError";
}
