import type {Attachment} from "svelte/attachments";

/**
 * A room that opens over or beside the chat (a side panel, a model's details): focus moves into it as it opens, so
 * the keyboard starts there, and Escape from inside closes it, unless a field inside took the key first.
 */
export function dismissible(onclose: () => void): Attachment<HTMLElement> {
    return (node) => {
        node.focus({preventScroll: true});
        const onkeydown = (event: KeyboardEvent) => {
            if (event.key !== "Escape" || event.defaultPrevented) return;
            event.preventDefault();
            onclose();
        };
        node.addEventListener("keydown", onkeydown);
        return () => node.removeEventListener("keydown", onkeydown);
    };
}
