// ESM type declarations: the same names as index.d.ts.
export * from './index.js'
import * as sdk from './index.js'
export default sdk
