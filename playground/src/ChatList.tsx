import { useCallback, useEffect, useRef, useState, type FormEvent } from 'react';
import { listChats, renameChat, type ChatListing } from './chat-api';
import type { OpenChats } from './open-chats';

/** A page of `GET /chats`; a refresh reads as many as are shown (up to the server's maximum). */
const PAGE = 30;
const MAX_PAGE = 200;

type Props = {
  chats: OpenChats;
  openId: string;
  onOpen: (chatId: string) => void;
  onNew: () => void;
  /** Stops and deletes the chat (the page closes its socket first). */
  onDelete: (chatId: string) => Promise<void>;
};

/** The user's chats, newest activity first, from `GET /chats`: open, new, rename, delete. */
export function ChatList({ chats, openId, onOpen, onNew, onDelete }: Props) {
  const [items, setItems] = useState<ChatListing[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | undefined>();
  const shown = useRef(PAGE);
  const generation = useRef(0); // a later refresh wins over an earlier one still on its way
  const [, setTick] = useState(0);

  const refresh = useCallback(async () => {
    const mine = ++generation.current;
    try {
      const page = await listChats(Math.min(MAX_PAGE, Math.max(PAGE, shown.current)));
      if (mine !== generation.current) return;
      shown.current = Math.max(PAGE, page.chats.length);
      setItems(page.chats);
      setCursor(page.nextCursor);
      setProblem(undefined);
    } catch (error) {
      if (mine === generation.current) setProblem(messageOf(error));
    }
  }, []);

  // The list changes when a response starts or ends (its chat is stored then), in any chat.
  useEffect(() => {
    void refresh();
    return chats.subscribe(() => {
      setTick(n => n + 1); // the page's own "answering" markers
      void refresh();
    });
  }, [chats, refresh]);

  async function more() {
    if (!cursor) return;
    const mine = generation.current;
    try {
      const page = await listChats(PAGE, cursor);
      if (mine !== generation.current) return; // a refresh came in between: it is newer
      setItems(held => {
        const known = new Set(held.map(chat => chat.id));
        const next = [...held, ...page.chats.filter(chat => !known.has(chat.id))];
        shown.current = next.length;
        return next;
      });
      setCursor(page.nextCursor);
    } catch (error) {
      setProblem(messageOf(error));
    }
  }

  async function rename(chatId: string, title: string) {
    const renamed = await renameChat(chatId, title);
    setItems(held => held.map(chat => (chat.id === chatId ? renamed : chat)));
  }

  async function remove(chatId: string) {
    generation.current++; // a refresh on its way may still list it
    await onDelete(chatId);
    setItems(held => held.filter(chat => chat.id !== chatId));
    void refresh();
  }

  const unsaved = !items.some(chat => chat.id === openId);
  return (
    <nav className="chat-list" aria-label="Chats" data-testid="chat-list">
      <button type="button" className="new-chat" data-testid="new-chat-button" onClick={onNew}>
        + New chat
      </button>
      {problem && (
        <p className="chat-list-error" role="alert" data-testid="chat-list-error">
          {problem}{' '}
          <button type="button" onClick={() => void refresh()}>
            Reload
          </button>
        </p>
      )}
      <ul>
        {unsaved && (
          <li
            className="chat-item current"
            data-testid="chat-item"
            data-chat-id={openId}
            data-unsaved="true"
            aria-current="page"
          >
            <span className="chat-open">
              <span className="chat-title" data-testid="chat-title">
                New chat
              </span>
            </span>
          </li>
        )}
        {items.map(chat => (
          <ChatItem
            key={chat.id}
            chat={chat}
            current={chat.id === openId}
            answering={chats.busy(chat.id) ?? chat.active}
            onOpen={() => onOpen(chat.id)}
            onRename={title => rename(chat.id, title)}
            onDelete={() => remove(chat.id)}
          />
        ))}
      </ul>
      {cursor && (
        <button
          type="button"
          className="more"
          data-testid="chats-more-button"
          onClick={() => void more()}
        >
          More
        </button>
      )}
    </nav>
  );
}

type ItemProps = {
  chat: ChatListing;
  current: boolean;
  answering: boolean;
  onOpen: () => void;
  onRename: (title: string) => Promise<void>;
  onDelete: () => Promise<void>;
};

function ChatItem({ chat, current, answering, onOpen, onRename, onDelete }: ItemProps) {
  const [mode, setMode] = useState<'show' | 'rename' | 'confirm' | 'deleting'>('show');
  const [title, setTitle] = useState(chat.title);
  const [problem, setProblem] = useState<string | undefined>();

  async function save(event: FormEvent) {
    event.preventDefault();
    const next = title.trim();
    if (!next || next === chat.title) return setMode('show');
    try {
      await onRename(next);
      setProblem(undefined);
      setMode('show');
    } catch (error) {
      setProblem(messageOf(error));
    }
  }

  async function confirmDelete() {
    setMode('deleting');
    try {
      await onDelete();
    } catch (error) {
      setProblem(messageOf(error));
      setMode('show');
    }
  }

  function startRename() {
    setTitle(chat.title);
    setProblem(undefined);
    setMode('rename');
  }

  return (
    <li
      className={`chat-item${current ? ' current' : ''}`}
      data-testid="chat-item"
      data-chat-id={chat.id}
      data-active={String(answering)}
      data-waiting={chat.waiting ?? ''}
      aria-current={current ? 'page' : undefined}
    >
      {mode === 'rename' ? (
        <form className="chat-rename" onSubmit={event => void save(event)}>
          <input
            data-testid="chat-rename-input"
            aria-label="Chat title"
            value={title}
            maxLength={200}
            autoFocus
            onChange={event => setTitle(event.target.value)}
            onKeyDown={event => event.key === 'Escape' && setMode('show')}
          />
        </form>
      ) : (
        <button
          type="button"
          className="chat-open"
          data-testid="chat-open"
          title={`updated ${new Date(chat.updatedAt).toLocaleString()}`}
          onClick={onOpen}
        >
          <span className="chat-title" data-testid="chat-title">
            {chat.title}
          </span>
          {answering && (
            <span className="marker answering" data-testid="chat-active-marker">
              answering…
            </span>
          )}
          {chat.waiting && (
            <span className="marker waiting" data-testid="chat-waiting-marker">
              {chat.waiting === 'approval' ? 'needs approval' : 'waits for an answer'}
            </span>
          )}
        </button>
      )}
      {mode === 'confirm' || mode === 'deleting' ? (
        <span className="chat-confirm" data-testid="chat-delete-confirmation">
          Delete this chat?{' '}
          <button
            type="button"
            data-testid="chat-delete-confirm"
            disabled={mode === 'deleting'}
            onClick={() => void confirmDelete()}
          >
            Delete
          </button>
          <button
            type="button"
            data-testid="chat-delete-cancel"
            disabled={mode === 'deleting'}
            onClick={() => setMode('show')}
          >
            Cancel
          </button>
        </span>
      ) : (
        mode === 'show' && (
          <span className="chat-actions">
            <button type="button" data-testid="chat-rename-button" onClick={startRename}>
              Rename
            </button>
            <button
              type="button"
              data-testid="chat-delete-button"
              onClick={() => setMode('confirm')}
            >
              Delete
            </button>
          </span>
        )
      )}
      {problem && (
        <span className="chat-problem" role="alert" data-testid="chat-item-error">
          {problem}
        </span>
      )}
    </li>
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
