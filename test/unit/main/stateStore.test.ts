import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterEach, describe, expect, it} from "vitest";
import {StateStore} from "../../../main/services/StateStore.js";

const dirs: string[] = [];
function store(budgetBytes: number): {store: StateStore; dir: string} {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-states-"));
    dirs.push(dir);
    return {store: new StateStore(dir, {budgetBytes}), dir};
}
afterEach(() => dirs.splice(0).forEach((dir) => fs.rmSync(dir, {recursive: true, force: true})));

function write(s: StateStore, conversation: string, message: string, bytes: number, mtime: number): string {
    const file = s.prepare(conversation, message);
    fs.writeFileSync(file, Buffer.alloc(bytes));
    fs.utimesSync(file, mtime, mtime);
    return file;
}

describe("StateStore", () => {
    it("keeps the states within the disk budget, oldest first out, never the one just saved", () => {
        const {store: s} = store(250);
        const a = write(s, "c1", "m1", 100, 1000);
        const b = write(s, "c2", "m2", 100, 2000);
        const c = write(s, "c1", "m3", 100, 3000);
        expect(s.trim(c)).toBe(1);
        expect([fs.existsSync(a), fs.existsSync(b), fs.existsSync(c)]).toEqual([false, true, true]);
        const big = write(s, "c3", "m4", 400, 500);
        s.trim(big);
        expect(fs.existsSync(big)).toBe(true);
        expect(fs.existsSync(b) || fs.existsSync(c)).toBe(false);
    });

    it("counts the states on disk, deletes them all, and takes a new budget (never a negative one)", () => {
        const {store: s} = store(1e9);
        write(s, "c1", "m1", 10, 2000);
        write(s, "c2", "m1", 30, 1000);
        expect(s.usage()).toEqual({bytes: 40, files: 2});
        s.budgetBytes = 15;
        expect(s.trim()).toBe(1);
        expect(s.usage()).toEqual({bytes: 10, files: 1});
        s.clear();
        expect(s.usage()).toEqual({bytes: 0, files: 0});
        expect(() => void (s.budgetBytes = -1)).toThrow(/not a disk budget/);
        s.budgetBytes = 0;
        expect(s.saving).toBe(false);
    });

    it("deletes a conversation's states and a message's state, and refuses what is not an id", () => {
        const {store: s} = store(1e9);
        const a = write(s, "c1", "m1", 10, 1000);
        const b = write(s, "c1", "m2", 10, 1000);
        const other = write(s, "c2", "m1", 10, 1000);
        s.deleteMessages("c1", ["m1"]);
        expect([fs.existsSync(a), fs.existsSync(b)]).toEqual([false, true]);
        expect(s.sizeOf("c1", "m2")).toBe(10);
        s.deleteConversation("c1");
        expect(fs.existsSync(b)).toBe(false);
        expect(fs.existsSync(other)).toBe(true);
        expect(() => s.pathOf("c1", "../x")).toThrow(/not an id/);
    });
});
