import {z} from "zod";
import {type RequestChannel, type Result, requestChannels} from "../../preload/contract.js";
import {toErrorInfo} from "../toErrorInfo.js";
import type {Handlers} from "./handlers.js";
import {requestSchemas} from "./schemas.js";

export type Dispatch = (channel: unknown, payload: unknown) => Promise<Result<unknown>>;

/**
 * The one wrapper around every handler, whatever the transport: an unknown channel or a payload
 * that fails its schema is refused, and a thrown error comes back as `{ok: false, error}`.
 */
export function createDispatch(handlers: Handlers, log: (message: string, err: unknown) => void = () => {}): Dispatch {
    return async (channel, payload) => {
        if (typeof channel !== "string" || !(requestChannels as readonly string[]).includes(channel))
            return {ok: false, error: {code: "BAD_REQUEST", message: `Unknown request channel ${JSON.stringify(channel)}`}};

        const name = channel as RequestChannel;
        const parsed = requestSchemas[name].safeParse(payload);
        if (!parsed.success)
            return {ok: false, error: {code: "BAD_REQUEST", message: `Invalid ${name} request: ${z.prettifyError(parsed.error)}`}};

        try {
            const handler = handlers[name] as (payload: unknown) => unknown;
            return {ok: true, value: await handler(parsed.data)};
        } catch (err) {
            return {ok: false, error: toErrorInfo(err, (unexpected) => log(`Unexpected error in ${name}`, unexpected))};
        }
    };
}
