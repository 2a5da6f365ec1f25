// A process that holds a data directory as Ponder does: claims it, prints "ready" and waits to be killed.
import {DataDirLock} from "../../../main/DataDirLock.js";

DataDirLock.acquire(process.argv[2]!);
console.log("ready");
setInterval(() => {}, 1000);
