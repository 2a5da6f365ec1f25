import {describe, expect, it} from "vitest";
import {sourceImports} from "./sourceImports.js";

// No file of main/ imports itself through others, type-only imports included: a circle makes the order modules load in
// decide what a module sees at start-up, and ties files that read as apart (the engine API's types to the engine's
// implementation) into one piece that cannot be read, tested or moved alone.

/** Each circle of the graph, as the files along it (the first again at the end). */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
    // Tarjan's strongly connected components; a circle is read off each component of more than one file (or a self-import).
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const components: string[][] = [];
    const visit = (file: string) => {
        index.set(file, index.size);
        low.set(file, index.get(file)!);
        stack.push(file);
        onStack.add(file);
        for (const next of graph.get(file) ?? []) {
            if (!index.has(next)) {
                visit(next);
                low.set(file, Math.min(low.get(file)!, low.get(next)!));
            } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
        }
        if (low.get(file) !== index.get(file)) return;
        const component: string[] = [];
        let member: string;
        do {
            member = stack.pop()!;
            onStack.delete(member);
            component.push(member);
        } while (member !== file);
        if (component.length > 1 || (graph.get(file) ?? []).includes(file)) components.push(component);
    };
    for (const file of graph.keys()) if (!index.has(file)) visit(file);
    return components.map((component) => {
        // A path from the component's first file (in sorted order) back to itself, through the component only.
        const members = new Set(component);
        const start = [...members].sort()[0]!;
        const previous = new Map<string, string>();
        const queue = [start];
        while (queue.length > 0) {
            const file = queue.shift()!;
            for (const next of graph.get(file) ?? []) {
                if (!members.has(next)) continue;
                if (next === start) {
                    const way: string[] = [];
                    for (let at = file; at !== start; at = previous.get(at)!) way.unshift(at);
                    return [start, ...way, start];
                }
                if (!previous.has(next)) {
                    previous.set(next, file);
                    queue.push(next);
                }
            }
        }
        return component;
    });
}

describe("import circles", () => {
    it("finds a circle where there is one", () => {
        const graph = new Map([
            ["a.ts", ["b.ts"]],
            ["b.ts", ["c.ts", "d.ts"]],
            ["c.ts", ["a.ts"]],
            ["d.ts", []],
            ["e.ts", ["e.ts"]]
        ]);
        expect(circles(graph)).toEqual([
            ["a.ts", "b.ts", "c.ts", "a.ts"],
            ["e.ts", "e.ts"]
        ]);
        expect(circles(new Map([["a.ts", ["b.ts"]]]))).toEqual([]);
    });

    it("has none among the files of main/, type-only imports included", () => {
        const files = sourceImports(["main"]);
        const graph = new Map(
            [...files].map(([file, imports]) => [
                file,
                imports.flatMap(({target}) => (target != null && files.has(target) ? [target] : []))
            ])
        );
        expect(files.has("main/engine/EngineApi.ts")).toBe(true);
        expect(circles(graph).map((circle) => circle.join(" -> "))).toEqual([]);
    });
});
