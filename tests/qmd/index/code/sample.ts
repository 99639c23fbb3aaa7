import { readFileSync } from "node:fs";
import type { Stats } from "node:fs";

export interface Route {
  method: string;
  path: string;
}

export type Handler = (req: Request) => Promise<Response>;

export enum Level {
  Debug,
  Info,
  Warn,
}

export class Router {
  private routes = new Map<string, Handler>();

  add(route: Route, handler: Handler): void {
    const key = `${route.method} ${route.path}`;

    this.routes.set(key, handler);
  }

  async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);

    const handler = this.routes.get(`${req.method} ${url.pathname}`);

    return handler ? handler(req) : new Response("not found", { status: 404 });
  }
}

export function loadConfig(file: string): Record<string, string> {
  const text = readFileSync(file, "utf8");

  return JSON.parse(text);
}
