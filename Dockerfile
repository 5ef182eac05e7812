# The image behind every app service of docker-compose.yml (migrate, web, worker, beat).
# It holds the run-time packages only (requirements-deploy.txt: no test or lint tools) and the app
# and demo project sources (.dockerignore leaves tests, benchmarks, examples and scripts out).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY requirements-deploy.txt ./
RUN pip install --no-cache-dir -r requirements-deploy.txt
COPY . .
# Static files (the admin's CSS, the tree page's assets, Swagger UI) are collected into the image;
# WhiteNoise serves them at /static/ from the web process itself.
RUN DJANGO_DEBUG=true python manage.py collectstatic --noinput \
    && useradd --create-home --uid 1000 app \
    && mkdir -p /app/media \
    && chown app /app/media
USER app
EXPOSE 8000
CMD ["gunicorn", "project.wsgi:application", "--bind", "0.0.0.0:8000", "--access-logfile", "-"]
