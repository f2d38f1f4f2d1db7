# The msgx local twin (`npm start`): every role on its schedule in one process plus the HTTP API.
# Used by docker-compose.yml, which points it at PostgreSQL, MariaDB (the mailbox) and Kafka.
FROM node:22-slim

WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund && npm cache clean --force

COPY . .
# The twin keeps local state (file sink, embedded data) under .msgx/ in its working directory.
RUN mkdir -p /app/.msgx && chown node:node /app/.msgx

USER node
ENV MSGX_HTTP_PORT=8080
EXPOSE 8080

HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.MSGX_HTTP_PORT||8080)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

CMD ["npm", "start"]
