/** Why a request is refused before it is served: the HTTP status, a sentence for the client and a stable code. */
export type HttpRefusal = {status: number; message: string; code: string};
