/**
 * The messages chat notifiers post, built from the hook payloads as GitLab's ChatMessage
 * classes build them, then shaped for each service (Slack-compatible attachments, Teams
 * MessageCards, Google Chat text, Discord embeds, Webex markdown, plain text).
 */

type Payload = Record<string, any>;

/** A message before formatting: a summary line with links, and attachment lines. */
export interface ChatMessage {
  /** Parts of the summary; links as [text, url]. */
  summary: (string | [string, string])[];
  lines: (string | [string, string])[][];
  userName: string;
  userAvatar: string | null;
  /** The color of a Slack attachment (`#345` for pushes, red or green for pipelines). */
  color: string;
}

const ZERO = /^0+$/;

function refName(ref: string): string {
  return ref.replace(/^refs\/(heads|tags)\//, '');
}

function pushMessage(data: Payload): ChatMessage {
  const project = data.project ?? {};
  const projectLink: [string, string] = [String(project.path_with_namespace ?? project.name), String(project.web_url)];
  const isTag = data.object_kind === 'tag_push';
  const name = refName(String(data.ref));
  const refUrl = `${project.web_url}/-/${isTag ? 'tags' : 'commits'}/${name}`;
  const kind = isTag ? 'tag' : 'branch';
  const user = String(data.user_name ?? data.user_username ?? 'Someone');
  let summary: ChatMessage['summary'];
  if (ZERO.test(String(data.before))) {
    summary = [`${user} pushed new ${kind} `, [name, refUrl], ' to ', projectLink];
  } else if (ZERO.test(String(data.after))) {
    summary = [`${user} removed ${kind} ${name} from `, projectLink];
  } else {
    const compare = `${project.web_url}/-/compare/${String(data.before).slice(0, 8)}...${String(data.after).slice(0, 8)}`;
    summary = [
      `${user} pushed to ${kind} `,
      [name, refUrl],
      ' of ',
      projectLink,
      ' (',
      ['Compare changes', compare],
      ')',
    ];
  }
  const lines = ((data.commits ?? []) as Payload[]).map((commit) => [
    [String(commit.id).slice(0, 8), String(commit.url)] as [string, string],
    `: ${commit.title ?? String(commit.message ?? '').split('\n')[0]} - ${commit.author?.name ?? ''}`,
  ]);
  return { summary, lines, userName: user, userAvatar: data.user_avatar ?? null, color: '#345' };
}

function pipelineMessage(data: Payload): ChatMessage {
  const attrs = data.object_attributes ?? {};
  const project = data.project ?? {};
  const user = String(data.user?.name ?? data.user?.username ?? 'Someone');
  const status = String(attrs.status);
  const word = status === 'success' ? 'passed' : status === 'failed' ? 'failed' : status;
  const url = `${project.web_url}/-/pipelines/${attrs.id}`;
  const refKind = attrs.tag ? 'tag' : 'branch';
  const summary: ChatMessage['summary'] = [
    [`Pipeline #${attrs.id}`, url],
    ` of ${refKind} `,
    [String(attrs.ref), `${project.web_url}/-/commits/${attrs.ref}`],
    ` by ${user} ${word}`,
    ...(typeof attrs.duration === 'number' ? [` in ${attrs.duration} s`] : []),
  ];
  return {
    summary,
    lines: [],
    userName: user,
    userAvatar: data.user?.avatar_url ?? null,
    color: status === 'success' ? 'good' : 'danger',
  };
}

function mergeRequestMessage(data: Payload): ChatMessage {
  const attrs = data.object_attributes ?? {};
  const project = data.project ?? {};
  const user = String(data.user?.name ?? data.user?.username ?? 'Someone');
  const action = String(attrs.action ?? attrs.state ?? 'updated');
  const verb =
    { open: 'opened', reopen: 'reopened', close: 'closed', merge: 'merged', update: 'updated' }[action] ?? action;
  return {
    summary: [
      `${user} ${verb} merge request `,
      [`!${attrs.iid}`, String(attrs.url ?? `${project.web_url}/-/merge_requests/${attrs.iid}`)],
      ` *${attrs.title ?? ''}* in `,
      [String(project.path_with_namespace ?? project.name), String(project.web_url)],
    ],
    lines: [],
    userName: user,
    userAvatar: data.user?.avatar_url ?? null,
    color: '#345',
  };
}

function genericMessage(data: Payload): ChatMessage {
  const project = data.project ?? {};
  const user = String(data.user?.name ?? data.user_name ?? 'Someone');
  return {
    summary: [
      `${String(data.object_kind ?? 'event').replace(/_/g, ' ')} by ${user} in `,
      [String(project.path_with_namespace ?? project.name), String(project.web_url)],
    ],
    lines: [],
    userName: user,
    userAvatar: null,
    color: '#345',
  };
}

/** The message for a payload, by its `object_kind`. */
export function chatMessageFor(data: Payload): ChatMessage {
  switch (data.object_kind) {
    case 'push':
    case 'tag_push':
      return pushMessage(data);
    case 'pipeline':
      return pipelineMessage(data);
    case 'merge_request':
      return mergeRequestMessage(data);
    default:
      return genericMessage(data);
  }
}

type LinkStyle = 'slack' | 'markdown' | 'plain';

function render(parts: (string | [string, string])[], style: LinkStyle): string {
  return parts
    .map((part) => {
      if (typeof part === 'string') return part;
      const [text, url] = part;
      if (style === 'slack') return `<${url}|${text}>`;
      if (style === 'markdown') return `[${text}](${url})`;
      return `${text} (${url})`;
    })
    .join('');
}

/** What one chat service gets: the JSON body of its incoming webhook. */
export function chatPayload(
  format: 'slack' | 'teams' | 'google_chat' | 'discord' | 'plain_text' | 'webex' | 'telegram',
  message: ChatMessage,
  options: { channel?: string | null; username?: string | null } = {},
): Record<string, unknown> {
  switch (format) {
    case 'slack': {
      const text = render(message.summary, 'slack');
      const attachmentText = message.lines.map((l) => render(l, 'slack')).join('\n');
      return {
        text,
        ...(options.channel ? { channel: options.channel } : {}),
        ...(options.username ? { username: options.username } : {}),
        attachments: attachmentText ? [{ text: attachmentText, color: message.color, fallback: attachmentText }] : [],
      };
    }
    case 'teams':
      return {
        '@type': 'MessageCard',
        '@context': 'https://schema.org/extensions',
        summary: render(message.summary, 'plain'),
        sections: [
          {
            activityTitle: render(message.summary, 'markdown'),
            activitySubtitle: '',
            activityText: message.lines.map((l) => render(l, 'markdown')).join('\n\n'),
            activityImage: message.userAvatar ?? '',
          },
        ],
      };
    case 'google_chat':
      return {
        text: [render(message.summary, 'slack'), ...message.lines.map((l) => render(l, 'slack'))].join('\n'),
      };
    case 'discord':
      return {
        embeds: [
          {
            description: [render(message.summary, 'markdown'), ...message.lines.map((l) => render(l, 'markdown'))].join(
              '\n',
            ),
            author: { name: message.userName, ...(message.userAvatar ? { icon_url: message.userAvatar } : {}) },
          },
        ],
      };
    case 'telegram':
      return {
        text: [render(message.summary, 'markdown'), ...message.lines.map((l) => render(l, 'markdown'))].join('\n'),
        parse_mode: 'markdown',
      };
    case 'webex':
      return {
        markdown: [render(message.summary, 'markdown'), ...message.lines.map((l) => render(l, 'markdown'))].join('\n'),
      };
    default:
      return {
        text: [render(message.summary, 'plain'), ...message.lines.map((l) => render(l, 'plain'))].join('\n'),
      };
  }
}
