// The saved states' disk budget: a setting validated as the other settings, followed by the state store (a lower budget
// trims at once, 0 saves none), the usage and deletion over IPC, and the saved state's figures kept with the answer.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterEach, describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {StateStore} from "../../../main/services/StateStore.js";
import {FakeEngine} from "./FakeEngine.js";

const mib = 1024 * 1024;
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => fs.rmSync(dir, {recursive: true, force: true})));

function setup(db = new AppDatabase(":memory:")) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-state-budget-"));
    dirs.push(dir);
    const states = new StateStore(dir);
    const engine = new FakeEngine();
    const services = new AppServices(db, engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/ponder-test-models",
        states,
        chat: {flushIntervalMs: 0}
    });
    const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
    const write = (conversation: string, message: string, bytes: number, mtime: number) => {
        const file = states.prepare(conversation, message);
        fs.writeFileSync(file, Buffer.alloc(bytes));
        fs.utimesSync(file, mtime, mtime);
        return file;
    };
    return {db, states, engine, services, dispatch, write};
}

describe("the saved states' disk budget", () => {
    it("defaults to 4 GiB, also for settings stored before it existed, and the store follows it", () => {
        const db = new AppDatabase(":memory:");
        db.settings.set("app", {theme: "dark"});
        const {services, states} = setup(db);
        expect(services.settings.get().stateDiskBudgetMib).toBe(4096);
        expect(states.budgetBytes).toBe(4 * 1024 * mib);
        expect(states.saving).toBe(true);
    });

    it("is validated: whole MiB from 0 to 1 TiB", async () => {
        const {services, dispatch} = setup();
        for (const bad of [-1, 1.5, 1024 * 1024 + 1, Number.NaN])
            expect(() => services.settings.update({stateDiskBudgetMib: bad})).toThrow();
        expect(await dispatch("settings:update", {stateDiskBudgetMib: "4 GiB"})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("settings:update", {stateDiskBudgetMib: 512})).toMatchObject({ok: true, value: {stateDiskBudgetMib: 512}});
        expect(services.settings.get().stateDiskBudgetMib).toBe(512);
    });

    it("a lower budget deletes the oldest states at once; 0 deletes them all and saves none", async () => {
        const {services, states, write} = setup();
        const a = write("c1", "m1", mib, 1000);
        const b = write("c1", "m2", mib, 2000);
        const c = write("c2", "m3", mib, 3000);
        services.settings.update({stateDiskBudgetMib: 2});
        expect(states.budgetBytes).toBe(2 * mib);
        expect([a, b, c].map((file) => fs.existsSync(file))).toEqual([false, true, true]);
        services.settings.update({stateDiskBudgetMib: 0});
        expect(states.saving).toBe(false);
        expect(states.usage()).toEqual({bytes: 0, files: 0});
    });

    it("tells what the states take and deletes them over IPC", async () => {
        const {dispatch, write} = setup();
        write("c1", "m1", 300, 1000);
        write("c2", "m2", 200, 2000);
        expect(await dispatch("states:usage", undefined)).toEqual({ok: true, value: {bytes: 500, files: 2}});
        expect(await dispatch("states:clear", undefined)).toEqual({ok: true, value: {bytes: 0, files: 0}});
        expect(await dispatch("states:usage", undefined)).toEqual({ok: true, value: {bytes: 0, files: 0}});
    });

    it("an answer saves its state only under a budget, and keeps the saved state's figures and the tokens resumed", async () => {
        const {services, engine} = setup();
        const saved = {path: "/x.state", bytes: 3 * mib, tokens: 4096, liveCells: 1024, liveBytes: 2 * mib, fullBytes: 8 * mib};
        engine.stateOutcome = {restored: {path: "/y.state", tokens: 2048}, note: null, saved};
        const c = services.conversations.create();
        services.chat.send(c.id, "What is 2 + 2?");
        await services.chat.idle();
        expect(engine.requests[0]!.states?.save).toMatch(/\.state$/);
        const stats = services.conversations.get(c.id).messages[1]!.stats!;
        expect(stats.savedState).toEqual({bytes: 3 * mib, tokens: 4096, liveCells: 1024, liveBytes: 2 * mib, fullBytes: 8 * mib});
        expect(stats.resumedTokens).toBe(2048);

        services.settings.update({stateDiskBudgetMib: 0});
        services.chat.send(c.id, "And 3 + 3?");
        await services.chat.idle();
        expect(engine.requests[1]!.states?.save).toBeUndefined();
        expect(engine.requests[1]!.states?.load.length).toBeGreaterThan(0);
    });
});
