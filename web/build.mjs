// Bundles every entry point in src/ (src/*.js and src/*.css; src/lib/ holds the modules they
// import) into crates/fermata-http/assets/, which the server embeds. The output is minified and
// the same bytes for the same lockfile and sources: stable names, no timestamps, no source maps
// with absolute paths, so CI can rebuild it and compare with what is committed.
import { readdirSync, rmSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const web = dirname(fileURLToPath(import.meta.url));
const source = join(web, "src");
const assets = join(web, "..", "crates", "fermata-http", "assets");

const entryPoints = readdirSync(source)
  .filter((name) => name.endsWith(".js") || name.endsWith(".css"))
  .sort()
  .map((name) => join(source, name));

// Only the files this build writes live in assets/: start from an empty folder so a removed
// entry point does not leave its old bundle behind.
rmSync(assets, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });

await esbuild.build({
  entryPoints,
  outdir: assets,
  bundle: true,
  minify: true,
  format: "iife",
  // Browsers of the last few years; nothing here needs a transform older engines would.
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  // The licences of the bundled packages, in one file beside the bundles.
  legalComments: "external",
  charset: "utf8",
  logLevel: "warning",
  // Paths in the output are relative to web/, never to the machine that built it.
  absWorkingDir: web,
});
