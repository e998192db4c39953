// esbuild bundles imported CSS into the one stylesheet beside the script.
declare module '*.css';
