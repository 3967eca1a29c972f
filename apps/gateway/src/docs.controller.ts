import { Controller, Get } from '@nestjs/common';
import { OPENAPI_DOCUMENT } from './openapi';

@Controller()
export class DocsController {
  @Get('docs')
  docs(): typeof OPENAPI_DOCUMENT {
    return OPENAPI_DOCUMENT;
  }
}
