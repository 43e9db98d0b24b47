/** The HTTP methods the client sends: the transport's requests and the request fence's accounting of writes both speak of them. */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
