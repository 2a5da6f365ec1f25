import type {PonderApi, Req, RequestChannel, Res, Result} from "../../preload/contract.js";

/** `bridge.invoke` that never throws: a rejected call comes back as an `INTERNAL` error, like every other error. */
export async function request<C extends RequestChannel>(bridge: PonderApi, channel: C, payload: Req<C>): Promise<Result<Res<C>>> {
    try {
        return await bridge.invoke(channel, payload);
    } catch (error) {
        return {ok: false, error: {code: "INTERNAL", message: error instanceof Error ? error.message : String(error)}};
    }
}
