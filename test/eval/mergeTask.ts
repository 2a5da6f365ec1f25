// The merge task lives with the app, which offers its held-out problems as samples; the tests and the bench use it here.
export * from "../../main/demo/mergeTask.js";
