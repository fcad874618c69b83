/** `node --import` this file: the plugin then runs as if no `@opentelemetry/*` package were installed. */

import { register } from "node:module";

register("./hide-opentelemetry.js", import.meta.url);
