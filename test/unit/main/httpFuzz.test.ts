// Both HTTP servers under generated hostile traffic over raw sockets (request lines, targets, percent-encodings,
// header names and values, chunked and content-length bodies, JSON bodies shaped like the OpenAI schemas), and under
// idle and slow clients: every request gets a status, nothing escapes to the process, and the servers still answer.
import fc from "fast-check";
import {mkdtemp, rm, writeFile} from "node:fs/promises";
import net from "node:net";
import {tmpdir} from "node:os";
import path from "node:path";
import {afterEach, describe, expect, it} from "vitest";
import {WebSocket} from "ws";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {LoopbackBridge} from "../../../main/ipc/LoopbackBridge.js";
import {requestPath} from "../../../main/server/ApiServer.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {rawRequest} from "../../fixtures/rawRequest.js";
import {FakeEngine} from "./FakeEngine.js";
import {serveApi} from "./serveApi.js";

const disposers: (() => Promise<void>)[] = [];
afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
});

/** The app's API server over a scripted engine, with a loaded model named `tiny-thinker`. */
async function apiServer(): Promise<{port: number}> {
    const engine = new FakeEngine();
    engine.thought = ["hm"];
    engine.answer = ["4"];
    engine.status = {
        ...engine.status,
        model: {
            id: "m1",
            path: "/models/tiny-thinker.gguf",
            name: "tiny",
            sizeBytes: 1,
            architecture: "llama",
            contextLength: 4096,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        }
    };
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
        version: "test",
        modelsDir: "/tmp/ponder-test-models",
        chat: {flushIntervalMs: 0},
        server: {timeouts: {headersTimeoutMs: 1000, requestTimeoutMs: 2000}}
    });
    disposers.push(() => services.dispose());
    const {port} = await serveApi(services);
    return {port};
}

async function bridge(options: {maxConnections?: number; headersTimeoutMs?: number} = {}): Promise<LoopbackBridge> {
    const staticDir = await mkdtemp(path.join(tmpdir(), "ponder-fuzz-"));
    await writeFile(path.join(staticDir, "index.html"), "<!doctype html><title>Ponder</title>");
    const started = await LoopbackBridge.start({
        dispatch: async (channel) => ({ok: true, value: channel}),
        staticDir,
        log: () => {},
        ...options
    });
    disposers.push(async () => {
        await started.dispose();
        await rm(staticDir, {recursive: true, force: true});
    });
    return started;
}

const statusLine = /^HTTP\/1\.1 (\d{3}) /;

const json = (value: unknown) => JSON.stringify(value);
const message = fc.record(
    {
        role: fc.constantFrom("system", "user", "assistant", "developer", "tool", "", "👾"),
        content: fc.oneof(
            fc.string(),
            fc.constant(null),
            fc.array(fc.record({type: fc.constantFrom("text", "image_url"), text: fc.string()}), {maxLength: 3}),
            fc.integer()
        )
    },
    {requiredKeys: []}
);
/** Bodies shaped like the OpenAI chat and completion requests, with every field sometimes absurd. */
const openAiBody = fc
    .record(
        {
            model: fc.oneof(fc.constant("tiny-thinker"), fc.string()),
            messages: fc.oneof(fc.array(message, {maxLength: 4}), fc.string()),
            prompt: fc.oneof(fc.string(), fc.array(fc.string(), {maxLength: 2})),
            stream: fc.oneof(fc.boolean(), fc.constant("yes")),
            max_tokens: fc.oneof(fc.integer({min: -5, max: 8}), fc.double(), fc.constant(2 ** 53)),
            temperature: fc.oneof(fc.double(), fc.constant(-1), fc.constant("hot")),
            stop: fc.oneof(fc.string(), fc.array(fc.string(), {maxLength: 6})),
            seed: fc.oneof(fc.integer(), fc.double()),
            ponder: fc.record(
                {
                    policy: fc.constantFrom("full", "lethe", "h2o", "nope"),
                    budget: fc.oneof(
                        fc.record({cells: fc.oneof(fc.integer(), fc.double())}),
                        fc.record({mib: fc.double()}),
                        fc.constant(null)
                    )
                },
                {requiredKeys: []}
            )
        },
        {requiredKeys: []}
    )
    .map(json);

const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}$/);
const anyText = fc.string({unit: "binary", maxLength: 40});
const method = fc.oneof(fc.constantFrom("GET", "POST", "OPTIONS", "PUT", "DELETE", "HEAD", "PATCH", "get"), token, anyText);
const target = fc.oneof(
    fc.constantFrom(
        "/",
        "//",
        "///v1/chat/completions",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models/",
        "http://[::1",
        "http://[::1]/v1/models",
        "http://127.0.0.1/v1/models",
        "*",
        "/%",
        "/%zz",
        "/..%2f..%2fetc/passwd",
        "/v1/%63hat/completions",
        "/bridge?token=",
        "/index.html",
        "/?token=%00",
        "HTTP://x",
        "//v1//models"
    ),
    fc.webUrl(),
    fc.webPath(),
    fc.string({unit: "binary", maxLength: 60}).map((text) => "/" + text),
    fc.string({unit: "binary", maxLength: 60}).map((text) => "/" + encodeURIComponent(text)),
    anyText
);
const header = fc.tuple(
    fc.oneof(
        token,
        fc.constantFrom(
            "Host",
            "Authorization",
            "Origin",
            "Content-Type",
            "Content-Length",
            "Transfer-Encoding",
            "Expect",
            "Connection",
            "Cookie"
        ),
        anyText
    ),
    fc.oneof(
        anyText,
        fc.constantFrom(
            "127.0.0.1",
            "application/json",
            "chunked",
            "Bearer x",
            "http://evil.example",
            "100-continue",
            "-1",
            "99999999999999999999"
        )
    )
);
/** How the body travels: none, with its true length, with a length longer than it (a short body), or chunked. */
const framing = fc.constantFrom("none", "length", "short", "chunked", "bad-chunk");

const request = fc
    .record({
        method,
        target,
        headers: fc.array(header, {maxLength: 6}),
        host: fc.boolean(),
        framing,
        body: fc.oneof(openAiBody, anyText, fc.json())
    })
    .map(({method, target, headers, host, framing, body}) => {
        const lines = [`${method} ${target} HTTP/1.1`];
        if (host) lines.push("Host: 127.0.0.1");
        for (const [name, value] of headers) lines.push(`${name}: ${value}`);
        lines.push("Connection: close");
        const bytes = Buffer.from(body, "utf8");
        if (framing === "length" || framing === "short")
            lines.push("Content-Type: application/json", `Content-Length: ${bytes.length + (framing === "short" ? 7 : 0)}`);
        if (framing === "chunked" || framing === "bad-chunk") lines.push("Content-Type: application/json", "Transfer-Encoding: chunked");
        const head = Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1");
        if (framing === "none") return head;
        if (framing === "chunked")
            return Buffer.concat([head, Buffer.from(bytes.length.toString(16) + "\r\n"), bytes, Buffer.from("\r\n0\r\n\r\n")]);
        if (framing === "bad-chunk") return Buffer.concat([head, Buffer.from("zz\r\n"), bytes]);
        return Buffer.concat([head, bytes]);
    });

/** Sends every request, `parallel` at a time; resolves with each one's answer. */
async function storm(port: number, requests: Buffer[], parallel = 12): Promise<string[]> {
    const answers: string[] = new Array(requests.length);
    let next = 0;
    await Promise.all(
        Array.from({length: parallel}, async () => {
            while (next < requests.length) {
                const index = next++;
                answers[index] = await rawRequest(port, requests[index]!, 8000);
            }
        })
    );
    return answers;
}

describe("requestPath", () => {
    it("reads origin-form and http targets without throwing, and refuses the rest", () => {
        expect(requestPath("//")).toBe("/");
        expect(requestPath("///v1/chat/completions")).toBe("/v1/chat/completions");
        expect(requestPath("/v1/models/?x=1#y")).toBe("/v1/models");
        expect(requestPath("http://127.0.0.1:8080/v1/models")).toBe("/v1/models");
        expect(requestPath("http://[::1")).toBeNull();
        expect(requestPath("*")).toBeNull();
        expect(requestPath("")).toBeNull();
        expect(requestPath(undefined)).toBeNull();
    });
});

describe("the API server at its HTTP edge", () => {
    it("answers the targets that used to take the process down, and says what it refused", async () => {
        const {port} = await apiServer();
        expect(await rawRequest(port, "GET // HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 404/);
        const bracket = await rawRequest(port, "GET http://[::1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        expect(bracket).toMatch(/^HTTP\/1\.1 400/);
        expect(bracket).toContain("invalid_target");
        const noHost = await rawRequest(port, "GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n");
        expect(noHost).toMatch(/^HTTP\/1\.1 400/);
        expect(noHost).toContain("no Host header");
        expect(noHost).not.toContain("undefined");
        const slashes = await rawRequest(port, "GET ///v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        expect(slashes).toMatch(/^HTTP\/1\.1 200/);
        const post = await rawRequest(
            port,
            "POST ///v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        );
        expect(post).toContain("No route POST /v1/nothing");
    });

    it("gives every generated request a status, and answers a well-formed one after the storm", async () => {
        const {port} = await apiServer();
        const requests = fc.sample(request, {numRuns: 300, seed: 20261125});
        const answers = await storm(port, requests);
        const unanswered = answers
            .map((answer, index) => ({answer, request: requests[index]!.toString("latin1").slice(0, 120)}))
            .filter(({answer}) => !statusLine.test(answer));
        expect(unanswered).toEqual([]);
        const models = await fetch(`http://127.0.0.1:${port}/v1/models`);
        expect(await models.json()).toMatchObject({data: [{id: "tiny-thinker"}]});
        const chat = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
            method: "POST",
            headers: {"content-type": "application/json"},
            body: json({model: "tiny-thinker", messages: [{role: "user", content: "2+2?"}]})
        });
        expect(chat.status).toBe(200);
        expect(await chat.json()).toMatchObject({choices: [{message: {content: "4"}}]});
    }, 120_000);

    it("times idle, slow and short-bodied clients out in seconds", async () => {
        const {port} = await apiServer();
        const started = Date.now();
        const [idle, slowHeaders, shortBody] = await Promise.all([
            rawRequest(port, "", 20_000),
            slowloris(port),
            rawRequest(
                port,
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
                20_000
            )
        ]);
        expect(idle).toMatch(/^HTTP\/1\.1 408/);
        expect(slowHeaders).toMatch(/^HTTP\/1\.1 408/);
        expect(shortBody).toMatch(/^HTTP\/1\.1 (400|408)/);
        expect(Date.now() - started).toBeLessThan(5000);
    }, 20_000);
});

/** Sends a request line, then a header every 200 ms, forever; resolves with the server's answer when it closes. */
function slowloris(port: number): Promise<string> {
    return new Promise((resolve) => {
        const socket = net.connect(port, "127.0.0.1");
        let received = "";
        socket.on("data", (chunk) => (received += chunk.toString("latin1")));
        socket.on("error", () => {});
        socket.write("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        const timer = setInterval(() => socket.writable && socket.write("X-Slow: 1\r\n"), 200);
        socket.on("close", () => {
            clearInterval(timer);
            resolve(received);
        });
    });
}

/** Opens `count` connections that send nothing, and keeps them open until disposed. */
async function idleSockets(port: number, count: number): Promise<net.Socket[]> {
    const sockets = await Promise.all(
        Array.from(
            {length: count},
            () =>
                new Promise<net.Socket>((resolve) => {
                    const socket = net.connect(port, "127.0.0.1", () => resolve(socket));
                    socket.on("error", () => {});
                })
        )
    );
    disposers.push(async () => sockets.forEach((socket) => socket.destroy()));
    return sockets;
}

describe("the loopback bridge at its HTTP edge", () => {
    it("gives every generated request a status, and serves the page after the storm", async () => {
        const started = await bridge();
        const requests = fc.sample(request, {numRuns: 300, seed: 7});
        const answers = await storm(started.port, requests);
        expect(answers.filter((answer) => !statusLine.test(answer))).toEqual([]);
        expect((await fetch(`http://127.0.0.1:${started.port}/`)).status).toBe(200);
    }, 120_000);

    it("still accepts the page and its WebSocket while idle sockets fill the connection cap", async () => {
        const started = await bridge();
        await idleSockets(started.port, 140);
        const began = Date.now();
        expect((await fetch(`http://127.0.0.1:${started.port}/`)).status).toBe(200);
        const ws = await new Promise<WebSocket>((resolve, reject) => {
            const socket = new WebSocket(`ws://127.0.0.1:${started.port}/bridge?token=${started.token}`);
            socket.once("open", () => resolve(socket));
            socket.once("error", reject);
        });
        const answer = await new Promise<unknown>((resolve) => {
            ws.once("message", (data) => resolve(JSON.parse(String(data))));
            ws.send(json({id: 1, channel: "app:info"}));
        });
        expect(answer).toEqual({id: 1, result: {ok: true, value: "app:info"}});
        expect(Date.now() - began).toBeLessThan(3000);

        // A second flood does not close the open WebSocket: only idle connections make room.
        await idleSockets(started.port, 140);
        const again = await new Promise<unknown>((resolve) => {
            ws.once("message", (data) => resolve(JSON.parse(String(data))));
            ws.send(json({id: 2, channel: "app:info"}));
        });
        expect(again).toEqual({id: 2, result: {ok: true, value: "app:info"}});
        ws.close();
    }, 30_000);

    it("closes idle and slow connections within seconds", async () => {
        const started = await bridge({headersTimeoutMs: 1000});
        const began = Date.now();
        const [idle, slowHeaders] = await Promise.all([rawRequest(started.port, "", 10_000), slowloris(started.port)]);
        expect(idle).toMatch(/^HTTP\/1\.1 408/);
        expect(slowHeaders).toMatch(/^HTTP\/1\.1 408/);
        expect(Date.now() - began).toBeLessThan(5000);
    }, 20_000);
});
