import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterEach, beforeEach, describe, expect, it} from "vitest";
import {AppDatabase, StorageError} from "../../../main/db/AppDatabase.js";
import {migrations} from "../../../main/db/migrations.js";

let dir: string;
beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-db-"));
});
afterEach(() => {
    fs.rmSync(dir, {recursive: true, force: true});
});

describe("AppDatabase", () => {
    it("applies the shipped migrations once, in order, with WAL on", () => {
        const file = path.join(dir, "a.sqlite");
        const db = new AppDatabase(file);
        expect(db.journalMode).toBe("wal");
        expect(db.appliedMigrations().map((m) => m.id)).toEqual(migrations.map((m) => m.id));
        db.dispose();

        const again = new AppDatabase(file);
        expect(again.appliedMigrations()).toHaveLength(migrations.length);
        again.dispose();
    });

    it("refuses a database written by a newer version", () => {
        const file = path.join(dir, "b.sqlite");
        new AppDatabase(file, [...migrations, {id: 9999, name: "future", sql: "CREATE TABLE future (x)"}]).dispose();
        expect(() => new AppDatabase(file)).toThrow(StorageError);
        expect(() => new AppDatabase(file)).toThrow(/newer version/);
    });

    it("refuses a renamed migration", () => {
        const file = path.join(dir, "c.sqlite");
        new AppDatabase(file).dispose();
        const renamed = migrations.map((m, i) => (i === 0 ? {...m, name: "other"} : m));
        expect(() => new AppDatabase(file, renamed)).toThrow(/mismatch/);
    });

    it("rolls back a failing migration and records nothing of it", () => {
        const file = path.join(dir, "d.sqlite");
        const broken = [...migrations, {id: 9000, name: "broken", sql: "CREATE TABLE half (x); THIS IS NOT SQL"}];
        expect(() => new AppDatabase(file, broken)).toThrow();
        const db = new AppDatabase(file);
        expect(db.appliedMigrations().map((m) => m.id)).toEqual(migrations.map((m) => m.id));
        db.dispose();
    });

    it("keeps a partial answer saved before the process stopped and marks it interrupted", () => {
        const file = path.join(dir, "e.sqlite");
        const db = new AppDatabase(file);
        db.conversations.insert({id: "c1", title: "t", settings: "{}", now: 1});
        db.messages.insert({id: "u1", conversation_id: "c1", role: "user", text: "hi", status: "complete", created_at: 1});
        db.messages.insert({id: "a1", conversation_id: "c1", role: "assistant", text: "", status: "streaming", created_at: 2});
        // Saved in two parts, each with what came since the one before.
        db.messages.appendProgress("a1", {text: "", thinking: "hm", thinking_tokens: 2, answer_tokens: 0, thinking_ms: 10, total_ms: 10});
        db.messages.appendProgress("a1", {
            text: "partial",
            thinking: "m",
            thinking_tokens: 3,
            answer_tokens: 1,
            thinking_ms: 10,
            total_ms: 20,
            first_token_ms: 5
        });
        expect(db.messages.get("a1")).toMatchObject({
            status: "streaming",
            text: "partial",
            thinking: "hmm",
            thinking_tokens: 3,
            total_ms: 20,
            first_token_ms: 5
        });
        expect(db.messages.listByConversation("c1").at(-1)).toMatchObject({text: "partial", thinking: "hmm"});
        // No finish(), no close(): the process is gone.

        const reopened = new AppDatabase(file);
        expect(reopened.messages.markInterrupted(4)).toBe(1);
        const row = reopened.messages.get("a1")!;
        expect(row).toMatchObject({
            status: "interrupted",
            text: "partial",
            thinking: "hmm",
            thinking_tokens: 3,
            answer_tokens: 1,
            total_ms: 20,
            first_token_ms: 5
        });
        // The parts are joined into the row, and gone.
        expect(reopened.messages.markInterrupted(5)).toBe(0);
        expect(reopened.messages.get("a1")).toMatchObject({text: "partial", thinking: "hmm"});
        expect(reopened.messages.listByConversation("c1").map((m) => m.seq)).toEqual([1, 2]);
        reopened.dispose();
        db.dispose();
    });

    it("deletes a conversation's messages with it and searches titles literally", () => {
        const db = new AppDatabase(":memory:");
        db.conversations.insert({id: "c1", title: "Prime numbers", settings: "{}", now: 1});
        db.conversations.insert({id: "c2", title: "100% sure_thing", settings: "{}", now: 2});
        db.messages.insert({id: "m1", conversation_id: "c1", role: "user", text: "x", status: "complete", created_at: 1});
        expect(db.conversations.list("prime").map((c) => c.id)).toEqual(["c1"]);
        expect(db.conversations.list("%").map((c) => c.id)).toEqual(["c2"]);
        expect(db.conversations.list("_").map((c) => c.id)).toEqual(["c2"]);
        expect(db.conversations.list().map((c) => c.id)).toEqual(["c2", "c1"]);
        db.conversations.delete("c1");
        expect(db.messages.get("m1")).toBeUndefined();
        db.dispose();
    });
});
