import type {Migration} from "./types.js";

// Bundled at build time (electron-vite) and at test time (vitest): the SQL files travel inside the code.
const files = import.meta.glob<string>("./migrations/*.sql", {query: "?raw", import: "default", eager: true});

/** The migrations shipped with this build, in order. File names are `NNNN_name.sql`. */
export const migrations: Migration[] = Object.entries(files)
    .map(([file, sql]): Migration => {
        const match = /\/(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
        if (match == null) throw new Error(`Migration file name "${file}" is not NNNN_name.sql`);

        return {id: Number(match[1]), name: match[2]!, sql};
    })
    .sort((a, b) => a.id - b.id);
