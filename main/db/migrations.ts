import fs from "node:fs";
import path from "node:path";
import type {Migration} from "./types.js";

// Bundled at build time (electron-vite) and at test time (vitest): the SQL files travel inside the code. Run from
// source without a bundler (tsx: `npm run calibrate -- --conversations`), `import.meta.glob` does not exist and the
// files are read from the folder beside this one.
let files: Record<string, string>;
try {
    files = import.meta.glob<string>("./migrations/*.sql", {query: "?raw", import: "default", eager: true});
} catch {
    const folder = path.join(import.meta.dirname, "migrations");
    files = Object.fromEntries(
        fs
            .readdirSync(folder)
            .filter((name) => name.endsWith(".sql"))
            .map((name) => [`./migrations/${name}`, fs.readFileSync(path.join(folder, name), "utf8")])
    );
}

/** The migrations shipped with this build, in order. File names are `NNNN_name.sql`. */
export const migrations: Migration[] = Object.entries(files)
    .map(([file, sql]): Migration => {
        const match = /\/(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
        if (match == null) throw new Error(`Migration file name "${file}" is not NNNN_name.sql`);

        return {id: Number(match[1]), name: match[2]!, sql};
    })
    .sort((a, b) => a.id - b.id);
