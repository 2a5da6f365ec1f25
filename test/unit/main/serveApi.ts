// The API server as the unit tests start it: turned on through the services' server settings on a free loopback port,
// with the official openai client pointed at it; the listener is closed when the test ends.
import OpenAI from "openai";
import {onTestFinished} from "vitest";
import type {ServerSettings, ServerStatus} from "../../../preload/contract.js";
import type {AppServices} from "../../../main/services/AppServices.js";

export type ServedApi = {
    /** The server's status once it listens. */
    status: ServerStatus;
    /** Its base URL, `http://127.0.0.1:<port>/v1`. */
    url: string;
    port: number;
    /** The openai client on `url`, without retries. */
    client: OpenAI;
};

/** Starts `services`' API server with `settings` (over `enabled: true, port: 0`) and closes it after the test. */
export async function serveApi(services: AppServices, settings: Partial<ServerSettings> = {}): Promise<ServedApi> {
    onTestFinished(() => services.server.dispose());
    const status = await services.server.update({enabled: true, port: 0, ...settings});
    const url = status.url!;
    const client = new OpenAI({baseURL: url, apiKey: "unused-on-loopback", maxRetries: 0});
    return {status, url, port: Number(new URL(url).port), client};
}
