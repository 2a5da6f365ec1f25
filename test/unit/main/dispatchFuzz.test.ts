import {describe, expect, it} from "vitest";
import {requestChannels, type ErrorCode, type Result} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {mulberry32} from "../../fixtures/gguf/random.js";
import {FakeEngine} from "./FakeEngine.js";

const codes: readonly ErrorCode[] = [
    "BAD_REQUEST",
    "NOT_FOUND",
    "FORBIDDEN",
    "MODEL_NOT_LOADED",
    "MODEL_INVALID",
    "ENGINE_UNPATCHED",
    "BUSY",
    "STORAGE",
    "ENGINE_STOPPED",
    "BUDGET_ABOVE_CONTEXT"
];

/** Random values of every JSON and JavaScript shape a hostile renderer could send, drawn from one seed. */
function arbitrary(random: ReturnType<typeof mulberry32>, depth = 0): unknown {
    const keys = [
        "id",
        "path",
        "uri",
        "url",
        "title",
        "text",
        "query",
        "conversationId",
        "downloadId",
        "modelId",
        "format",
        "settings",
        "compression",
        "policy",
        "temperature",
        "maxTokens",
        "budget",
        "__proto__",
        "constructor",
        "prototype",
        "toString"
    ];
    const strings = [
        "",
        " ",
        "x",
        "../../etc/passwd",
        "\u0000",
        "%",
        "%E0%A4%A",
        "\ud800",
        "🙂".repeat(50),
        "a".repeat(5000),
        "markdown",
        "json",
        "full",
        "lethe",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "NaN",
        "-1",
        "1e309",
        '{"ok":true}'
    ];
    switch (random.int(depth > 2 ? 9 : 12)) {
        case 0:
            return undefined;
        case 1:
            return null;
        case 2:
            return random.uniform() < 0.5;
        case 3:
            return [0, -1, 1.5, NaN, Infinity, -Infinity, 2 ** 53, -(2 ** 63), Number.MAX_VALUE, Number.MIN_VALUE][random.int(10)];
        case 4:
            return 10n ** BigInt(random.int(30));
        case 5:
        case 6:
            return strings[random.int(strings.length)];
        case 7:
            return Symbol("s");
        case 8:
            return () => 1;
        case 9:
            return Array.from({length: random.int(4)}, () => arbitrary(random, depth + 1));
        default: {
            const object: Record<string, unknown> = random.uniform() < 0.1 ? (Object.create(null) as Record<string, unknown>) : {};
            for (let i = random.int(5); i > 0; i--)
                Object.defineProperty(object, keys[random.int(keys.length)]!, {
                    value: arbitrary(random, depth + 1),
                    enumerable: true,
                    configurable: true,
                    writable: true
                });
            return object;
        }
    }
}

describe("IPC dispatch under random and malformed payloads", () => {
    it("answers every one of 6,000 requests on every channel with a result or a typed refusal, never a crash", async () => {
        const engine = new FakeEngine();
        const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/ponder-fuzz-models"
        });
        const unexpected: unknown[] = [];
        const dispatch = createDispatch(
            createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}),
            (_message, err) => unexpected.push(err)
        );
        const conversation = services.conversations.create();
        const random = mulberry32(10);
        const outcomes = new Map<string, number>();
        const pick = <T>(...values: T[]): T => values[random.int(values.length)]!;
        const someId = () => pick<unknown>(conversation.id, "missing-id", "x".repeat(200), arbitrary(random));
        const someText = () => pick<unknown>("hello", "  ", "a".repeat(300), "", arbitrary(random));
        const shapes: Record<string, () => unknown> = {
            "conversations:get": () => ({id: someId()}),
            "conversations:delete": () => ({id: pick<unknown>("missing-id", arbitrary(random))}),
            "conversations:rename": () => ({id: someId(), title: someText()}),
            "conversations:export": () => ({id: someId(), format: pick<unknown>("markdown", "json", "pdf")}),
            "conversations:updateSettings": () => ({
                id: someId(),
                settings: {temperature: pick<unknown>(0.5, -1, 9, NaN), maxTokens: pick<unknown>(10, 0, 1e12), systemPrompt: someText()}
            }),
            "conversations:list": () => ({query: someText()}),
            "conversations:create": () => ({title: someText()}),
            "chat:send": () => ({conversationId: someId(), text: someText()}),
            "chat:regenerate": () => ({conversationId: someId()}),
            "chat:stop": () => ({conversationId: someId()}),
            "models:load": () => ({id: someId()}),
            "models:remove": () => ({id: someId()}),
            "models:details": () => ({id: someId()}),
            "models:setGpuLayers": () => ({id: someId(), gpuLayers: pick<unknown>("auto", "max", 0, 12, -1, 2.5, 1e6, "all")}),
            "models:cancelDownload": () => ({downloadId: someId()}),
            "models:add": () => ({path: pick<unknown>("/nope.gguf", "/etc/passwd", "/", "\u0000", someText())}),
            "compression:estimate": () => ({compression: {policy: pick<unknown>("full", "lethe", "bogus"), budget: arbitrary(random)}}),
            "settings:update": () => ({defaultModelId: someId()}),
            "engine:setBuild": () => ({build: pick<unknown>("auto", "cpu", "cuda", "metal", "gpu", false, arbitrary(random))})
        };
        const channels: unknown[] = [...requestChannels, "", "fs:readFile", "__proto__", "constructor", 42, null, {}];

        for (let i = 0; i < 6000; i++) {
            const channel = channels[random.int(channels.length)];
            // Half the time, a payload of the channel's shape with values that may be wrong, so handlers are reached too.
            const shape = typeof channel === "string" && Object.hasOwn(shapes, channel) ? shapes[channel] : undefined;
            const payload = shape != null && random.uniform() < 0.5 ? shape() : arbitrary(random);
            let result: Result<unknown>;
            try {
                result = await dispatch(channel, payload);
            } catch (err) {
                throw new Error(`dispatch threw on ${String(channel)}: ${(err as Error).message}`, {cause: err});
            }
            expect(typeof result.ok).toBe("boolean");
            const outcome = result.ok ? "ok" : result.error.code;
            outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
            if (!result.ok) {
                expect(codes, `${String(channel)}: ${result.error.message}`).toContain(result.error.code);
                expect(typeof result.error.message).toBe("string");
            }
            await services.chat.idle();
        }
        expect(unexpected).toEqual([]);
        // The payloads reach the handlers, not only the schemas.
        expect(outcomes.get("ok")).toBeGreaterThan(100);
        expect(outcomes.get("NOT_FOUND")).toBeGreaterThan(10);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        expect(Object.keys(Object.prototype)).toEqual([]);
        await services.chat.dispose();
    });
});
